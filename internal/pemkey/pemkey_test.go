package pemkey

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kprod/kprod/internal/testpki"
)

// TestEncryptedPKCS8 decrypts keys that openssl encrypted with each PBES2
// combination it offers, as users make them for ssl.key.password.
func TestEncryptedPKCS8(t *testing.T) {
	testpki.NeedOpenSSL(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	dir := t.TempDir()
	plain := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(plain, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	const pass = "kprod-key-pässword"
	for _, args := range [][]string{
		{"-v2", "aes-256-cbc"},
		{"-v2", "aes-128-cbc"},
		{"-v2", "aes-192-cbc", "-v2prf", "hmacWithSHA512"},
		{"-v2", "aes-256-cbc", "-v2prf", "hmacWithSHA1"},
		{"-v2", "des3"},
	} {
		name := strings.Join(args, " ")
		out := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".pem")
		cmd := exec.Command("openssl", append([]string{"pkcs8", "-topk8", "-in", plain, "-out", out, "-passout", "pass:" + pass}, args...)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			if args[1] == "aes-256-cbc" && len(args) == 2 {
				// What scripts/kafka-cluster.sh makes, and every
				// OpenSSL can: else this test would test nothing.
				t.Fatalf("openssl %s: %v: %s", name, err, b)
			}
			t.Logf("openssl %s: %v: %s (skipped: this openssl cannot make it)", name, err, b)
			continue
		}
		text, _ := os.ReadFile(out)
		blocks, err := Parse(string(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := PrivateKey(blocks, pass)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !key.Equal(got) {
			t.Errorf("%s: decrypted a different key", name)
		}
		if _, err := PrivateKey(blocks, "wrong"); !errors.Is(err, ErrWrongPassword) {
			t.Errorf("%s with a wrong password: %v", name, err)
		}
		if _, err := PrivateKey(blocks, ""); !errors.Is(err, ErrNoPassword) {
			t.Errorf("%s without a password: %v", name, err)
		}
		// A properties file with "\" continuations joins the lines.
		joined := strings.ReplaceAll(string(text), "\n", " ")
		if b2, err := Parse(joined); err != nil {
			t.Errorf("%s on one line: %v", name, err)
		} else if _, err := PrivateKey(b2, pass); err != nil {
			t.Errorf("%s on one line: %v", name, err)
		}
	}

	// Legacy OpenSSL encryption is refused with the conversion command.
	legacy := filepath.Join(dir, "legacy.pem")
	if b, err := exec.Command("openssl", "ec", "-in", plain, "-out", legacy, "-aes256", "-passout", "pass:"+pass).CombinedOutput(); err == nil {
		text, _ := os.ReadFile(legacy)
		blocks, err := Parse(string(text))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := PrivateKey(blocks, pass); err == nil || !strings.Contains(err.Error(), "openssl pkcs8 -topk8") {
			t.Errorf("legacy encryption: %v", err)
		}
	} else {
		t.Errorf("openssl ec -aes256, to make a legacy-encrypted key: %v: %s", err, b)
	}
}

func TestPlainKeys(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p8, _ := x509.MarshalPKCS8PrivateKey(key)
	sec1, _ := x509.MarshalECPrivateKey(key)
	for _, b := range []*pem.Block{{Type: "PRIVATE KEY", Bytes: p8}, {Type: "EC PRIVATE KEY", Bytes: sec1}} {
		blocks, err := Parse("Bag Attributes\n" + string(pem.EncodeToMemory(b)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := PrivateKey(blocks, "")
		if err != nil || !key.Equal(got) {
			t.Errorf("%s: %v", b.Type, err)
		}
		if _, err := PrivateKey(blocks, "pw"); !errors.Is(err, ErrNotEncrypted) {
			t.Errorf("%s with a password: %v", b.Type, err)
		}
	}
	if _, err := PrivateKey(nil, ""); err == nil {
		t.Error("no key: no error")
	}
}

// TestEncryptedUnsupportedKey: a key the password decrypts but kprod
// cannot use (Ed448) is reported as such, not as a wrong password.
func TestEncryptedUnsupportedKey(t *testing.T) {
	testpki.NeedOpenSSL(t)
	dir := t.TempDir()
	plain, enc := filepath.Join(dir, "ed448.pem"), filepath.Join(dir, "ed448-enc.pem")
	if b, err := exec.Command("openssl", "genpkey", "-algorithm", "ed448", "-out", plain).CombinedOutput(); err != nil {
		t.Fatalf("openssl genpkey ed448: %v: %s", err, b)
	}
	if b, err := exec.Command("openssl", "pkcs8", "-topk8", "-in", plain, "-out", enc, "-passout", "pass:secret", "-v2", "aes-256-cbc").CombinedOutput(); err != nil {
		t.Fatalf("openssl pkcs8: %v: %s", err, b)
	}
	text, _ := os.ReadFile(enc)
	blocks, err := Parse(string(text))
	if err != nil {
		t.Fatal(err)
	}
	_, err = PrivateKey(blocks, "secret")
	if err == nil || errors.Is(err, ErrWrongPassword) || !strings.Contains(err.Error(), "RSA, ECDSA and Ed25519") {
		t.Errorf("Ed448 key with its password: %v, want a cannot-parse error naming the key types kprod reads", err)
	}
	if _, err := PrivateKey(blocks, "wrong"); !errors.Is(err, ErrWrongPassword) {
		t.Errorf("Ed448 key with a wrong password: %v, want ErrWrongPassword", err)
	}
}

// TestTrustedCertificate: OpenSSL's TRUSTED CERTIFICATE blocks (openssl
// x509 -trustout; RHEL's ca-bundle.trust.crt), a certificate followed by
// trust settings, and the old X509 CERTIFICATE label are certificates, as
// Java's PEM store reads every block whose label ends in CERTIFICATE.
func TestTrustedCertificate(t *testing.T) {
	testpki.NeedOpenSSL(t)
	ca := testpki.NewCA(t, "trusted-ca")
	dir := t.TempDir()
	in := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(in, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.DER}), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("openssl", "x509", "-in", in, "-trustout", "-addtrust", "serverAuth").Output()
	if err != nil {
		t.Fatalf("openssl x509 -trustout: %v", err)
	}
	if !strings.Contains(string(out), "BEGIN TRUSTED CERTIFICATE") {
		t.Fatalf("openssl wrote no TRUSTED CERTIFICATE:\n%s", out)
	}
	old := pem.EncodeToMemory(&pem.Block{Type: "X509 CERTIFICATE", Bytes: ca.DER})
	for name, text := range map[string]string{"TRUSTED CERTIFICATE": string(out), "X509 CERTIFICATE": string(old)} {
		blocks, err := Parse(text)
		if err != nil {
			t.Fatalf("%s: Parse: %v", name, err)
		}
		certs, err := Certificates(blocks)
		if err != nil {
			t.Fatalf("%s: Certificates: %v", name, err)
		}
		if len(certs) != 1 || !certs[0].Equal(ca.Cert) {
			t.Errorf("%s: got %d certificates, want the CA's", name, len(certs))
		}
	}
}
