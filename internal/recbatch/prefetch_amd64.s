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

// func prefetchWriteAsm(b []byte, off int)
TEXT ·prefetchWriteAsm(SB), NOSPLIT|NOFRAME, $0-32
	MOVQ b_base+0(FP), AX
	MOVQ off+24(FP), CX
	// PREFETCHW (AX)(CX*1) and PREFETCHW 64(AX)(CX*1), spelled as bytes:
	// the Go assembler has no mnemonic for it.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x0C; BYTE $0x08
	BYTE $0x0F; BYTE $0x0D; BYTE $0x4C; BYTE $0x08; BYTE $0x40
	RET

// func cpuidPrefetchW() bool
TEXT ·cpuidPrefetchW(SB), NOSPLIT, $0-1
	MOVL $0x80000000, AX
	CPUID
	CMPL AX, $0x80000001
	JB none
	MOVL $0x80000001, AX
	XORL CX, CX
	CPUID
	// ECX bit 8: PRFCHW (Intel), 3DNowPrefetch (AMD).
	SHRL $8, CX
	ANDL $1, CX
	MOVB CX, ret+0(FP)
	RET
none:
	MOVB $0, ret+0(FP)
	RET
