// Package pemkey reads the PEM certificates and private keys of Java's
// PEM key and trust stores (KIP-651): ssl.truststore.* and ssl.keystore.*
// with type PEM, as files or as the text of a property.
//
// It accepts what Kafka's PemStore accepts — X.509 certificates, PKCS#8
// private keys, and PKCS#8 keys encrypted with PBES2 (PBKDF2 with
// HMAC-SHA1/224/256/384/512, AES-128/192/256-CBC or 3DES-CBC), which is
// what "openssl pkcs8 -topk8 -v2 aes-256-cbc" writes — and also the
// PKCS#1 ("RSA PRIVATE KEY") and SEC 1 ("EC PRIVATE KEY") keys Go reads.
// Legacy OpenSSL encryption (Proc-Type: 4,ENCRYPTED; x509.DecryptPEMBlock
// is deprecated as insecure) and PBES1 are refused with the openssl
// command that converts them.
//
// Like Kafka's PEM parser it is lenient about whitespace, so that a PEM
// text given in a properties file joined onto one line (a "\" line
// continuation drops the newlines) still parses.
//
// Errors never contain key material or passwords.
package pemkey

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/pbkdf2"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"strings"
)

// Block is one PEM block.
type Block struct {
	Type    string // "CERTIFICATE", "PRIVATE KEY", ...
	Bytes   []byte
	Headers bool // it had RFC 1421 headers (legacy encryption)
}

var pemRE = regexp.MustCompile(`(?s)-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END ([A-Z0-9 ]+)-----`)

// Parse returns the PEM blocks of text in order. Text outside blocks is
// ignored (as openssl's "Bag Attributes" lines).
func Parse(text string) ([]Block, error) {
	var out []Block
	for _, m := range pemRE.FindAllStringSubmatch(text, -1) {
		if m[1] != m[3] {
			return nil, fmt.Errorf("PEM block BEGIN %s ends with END %s", m[1], m[3])
		}
		body := m[2]
		b := Block{Type: m[1]}
		if strings.Contains(body, ":") {
			// RFC 1421 headers ("Proc-Type: 4,ENCRYPTED", "DEK-Info:
			// ..."): drop the header lines.
			b.Headers = true
			lines := strings.Split(body, "\n")
			var keep []string
			for _, l := range lines {
				if !strings.Contains(l, ":") {
					keep = append(keep, l)
				}
			}
			body = strings.Join(keep, "")
		}
		body = strings.Join(strings.Fields(body), "")
		der, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return nil, fmt.Errorf("PEM block %s is not valid base64", b.Type)
		}
		b.Bytes = der
		out = append(out, b)
	}
	return out, nil
}

// Certificates returns the X.509 certificates among blocks: CERTIFICATE,
// the old X509 CERTIFICATE, and OpenSSL's TRUSTED CERTIFICATE (openssl
// x509 -trustout, RHEL's ca-bundle.trust.crt), whose trust settings after
// the certificate are ignored, as Java's PEM store reads every block
// whose label ends in CERTIFICATE and only the certificate of each.
func Certificates(blocks []Block) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for i, b := range blocks {
		der := b.Bytes
		switch b.Type {
		case "CERTIFICATE", "X509 CERTIFICATE":
		case "TRUSTED CERTIFICATE":
			var first asn1.RawValue
			if _, err := asn1.Unmarshal(der, &first); err != nil {
				return nil, fmt.Errorf("certificate %d (TRUSTED CERTIFICATE): %w", i+1, err)
			}
			der = first.FullBytes
		default:
			continue
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", i+1, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// ErrNoPassword: the key is encrypted and no password was given.
var ErrNoPassword = errors.New("the private key is encrypted: give its password in ssl.key.password")

// ErrWrongPassword: the password does not decrypt the private key.
var ErrWrongPassword = errors.New("cannot decrypt the private key: is ssl.key.password the key's password?")

// ErrNotEncrypted: a password was given for a key that is not encrypted
// (Kafka refuses that too).
var ErrNotEncrypted = errors.New("ssl.key.password is set but the private key is not encrypted: remove ssl.key.password, or encrypt the key (openssl pkcs8 -topk8 -v2 aes-256-cbc)")

// PrivateKey returns the one private key among blocks, decrypting it with
// password if it is an encrypted PKCS#8 key. password "" means none was
// given.
func PrivateKey(blocks []Block, password string) (crypto.PrivateKey, error) {
	var key crypto.PrivateKey
	n := 0
	for _, b := range blocks {
		if !strings.HasSuffix(b.Type, "PRIVATE KEY") {
			continue
		}
		n++
		if n > 1 {
			return nil, errors.New("more than one private key: give exactly one")
		}
		var err error
		key, err = parseKey(b, password)
		if err != nil {
			return nil, err
		}
	}
	if n == 0 {
		return nil, errors.New("no private key (a -----BEGIN PRIVATE KEY----- or -----BEGIN ENCRYPTED PRIVATE KEY----- block)")
	}
	return key, nil
}

func parseKey(b Block, password string) (crypto.PrivateKey, error) {
	if b.Headers {
		return nil, fmt.Errorf("the %s uses OpenSSL's legacy PEM encryption, which is insecure and not supported (as in Java): convert it with openssl pkcs8 -topk8 -v2 aes-256-cbc -in old.pem -out new.pem", strings.ToLower(b.Type))
	}
	switch b.Type {
	case "ENCRYPTED PRIVATE KEY":
		if password == "" {
			return nil, ErrNoPassword
		}
		der, err := decryptPKCS8(b.Bytes, password)
		if err != nil {
			return nil, err
		}
		return checkKey(x509.ParsePKCS8PrivateKey(der))
	case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
		if password != "" {
			return nil, ErrNotEncrypted
		}
		switch b.Type {
		case "RSA PRIVATE KEY":
			return checkKey(x509.ParsePKCS1PrivateKey(b.Bytes))
		case "EC PRIVATE KEY":
			return checkKey(x509.ParseECPrivateKey(b.Bytes))
		}
		return checkKey(x509.ParsePKCS8PrivateKey(b.Bytes))
	}
	return nil, fmt.Errorf("unsupported key block %q: use PKCS#8 (BEGIN PRIVATE KEY or BEGIN ENCRYPTED PRIVATE KEY)", b.Type)
}

func checkKey[K any](k K, err error) (crypto.PrivateKey, error) {
	if err != nil {
		return nil, fmt.Errorf("cannot parse the private key (kprod reads RSA, ECDSA and Ed25519 keys): %w", err)
	}
	switch any(k).(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("unsupported private key type %T", k)
}

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

// RFC 5208 / RFC 8018 structures.
type encryptedPrivateKeyInfo struct {
	Algo pkix.AlgorithmIdentifier
	Data []byte
}

// privateKeyInfo is RFC 5208's, without its optional attributes.
type privateKeyInfo struct {
	Version    int
	Algo       pkix.AlgorithmIdentifier
	PrivateKey []byte
}

type pbes2Params struct {
	KDF pkix.AlgorithmIdentifier
	Enc pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt   []byte
	Iter   int
	KeyLen int                      `asn1:"optional"`
	PRF    pkix.AlgorithmIdentifier `asn1:"optional"`
}

const hintV2 = "re-encrypt it with openssl pkcs8 -topk8 -v2 aes-256-cbc"

// decryptPKCS8 decrypts an EncryptedPrivateKeyInfo protected with PBES2.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, errors.New("the encrypted private key is not a PKCS#8 EncryptedPrivateKeyInfo")
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("the private key is encrypted with %v, not PBES2: %s", info.Algo.Algorithm, hintV2)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algo.Parameters.FullBytes, &params); err != nil {
		return nil, errors.New("bad PBES2 parameters in the encrypted private key")
	}
	if !params.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("the private key's key derivation is %v, not PBKDF2 (scrypt is not supported): %s", params.KDF.Algorithm, hintV2)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KDF.Parameters.FullBytes, &kdf); err != nil {
		return nil, errors.New("bad PBKDF2 parameters in the encrypted private key")
	}
	var prf func() hash.Hash
	switch {
	case len(kdf.PRF.Algorithm) == 0, kdf.PRF.Algorithm.Equal(oidHMACSHA1):
		prf = sha1.New
	case kdf.PRF.Algorithm.Equal(oidHMACSHA224):
		prf = sha256.New224
	case kdf.PRF.Algorithm.Equal(oidHMACSHA256):
		prf = sha256.New
	case kdf.PRF.Algorithm.Equal(oidHMACSHA384):
		prf = sha512.New384
	case kdf.PRF.Algorithm.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("unsupported PBKDF2 PRF %v in the encrypted private key: %s", kdf.PRF.Algorithm, hintV2)
	}
	var keyLen int
	var newCipher func([]byte) (cipher.Block, error)
	switch enc := params.Enc.Algorithm; {
	case enc.Equal(oidAES128CBC):
		keyLen, newCipher = 16, aes.NewCipher
	case enc.Equal(oidAES192CBC):
		keyLen, newCipher = 24, aes.NewCipher
	case enc.Equal(oidAES256CBC):
		keyLen, newCipher = 32, aes.NewCipher
	case enc.Equal(oidDESEDE3CBC):
		keyLen, newCipher = 24, des.NewTripleDESCipher
	default:
		return nil, fmt.Errorf("unsupported cipher %v in the encrypted private key: %s", enc, hintV2)
	}
	if kdf.KeyLen != 0 && kdf.KeyLen != keyLen {
		return nil, errors.New("the encrypted private key's PBKDF2 key length does not match its cipher")
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.Enc.Parameters.FullBytes, &iv); err != nil {
		return nil, errors.New("bad cipher parameters (IV) in the encrypted private key")
	}
	if kdf.Iter < 1 || kdf.Iter > 10_000_000 {
		return nil, fmt.Errorf("the encrypted private key asks for %d PBKDF2 iterations", kdf.Iter)
	}
	key, err := pbkdf2.Key(prf, password, kdf.Salt, kdf.Iter, keyLen)
	if err != nil {
		return nil, fmt.Errorf("PBKDF2: %w", err)
	}
	block, err := newCipher(key)
	if err != nil {
		return nil, err
	}
	bs := block.BlockSize()
	if len(iv) != bs || len(info.Data) == 0 || len(info.Data)%bs != 0 {
		return nil, errors.New("the encrypted private key's data or IV has the wrong size")
	}
	out := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, info.Data)
	// PKCS#7 padding; a wrong password shows here, or in the parse after.
	pad := int(out[len(out)-1])
	wrong := ErrWrongPassword
	if pad == 0 || pad > bs {
		return nil, wrong
	}
	for _, p := range out[len(out)-pad:] {
		if int(p) != pad {
			return nil, wrong
		}
	}
	out = out[:len(out)-pad]
	// A PrivateKeyInfo that x509 cannot read (a DSA or Ed448 key, say)
	// was decrypted with the right password: parseKey says what it is.
	var pki privateKeyInfo
	if rest, err := asn1.Unmarshal(out, &pki); err != nil || len(rest) != 0 {
		return nil, wrong
	}
	return out, nil
}
