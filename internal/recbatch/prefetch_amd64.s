#include "textflag.h"

// func Prefetch(b []byte)
TEXT ·Prefetch(SB), NOSPLIT|NOFRAME, $0-24
	MOVQ b_base+0(FP), AX
	MOVQ b_len+8(FP), CX
	TESTQ CX, CX
	JEQ done
	// A prefetch never faults: the second one may lie past a short b.
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 -1(AX)(CX*1)
done:
	RET
