package credential

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Credentials made up for these tests, in the shapes of real ones.
const (
	fakeKeyID     = "AKIA" + "Z7Q4M2XK9PLR3TWB"
	fakeTempID    = "ASIA" + "QX2M7K4Z9RPLW3TB"
	fakeAWSSecret = "q8Zr3kX/7vLm2+Pw9TnB4yHc6JdF1sGa0eUoRiWx"
	fakeGitHub    = "ghp_" + "R4nd0mT0k3nV4lu3Th4tIsThirtySixCh4r5"
	fakeJWT       = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFpbmVyIn0.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"
	fakePEM       = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
)

func TestDetectCredential(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		// kind is a phrase of the kind detected, "" for none.
		kind  string
		shown string
	}{
		{value: fakeKeyID, kind: "AWS access key ID", shown: "AKIA…"},
		{value: fakeTempID, kind: "AWS access key ID", shown: "ASIA…"},
		{value: "--key=" + fakeKeyID, kind: "AWS access key ID"},
		{name: "AWS_SECRET_ACCESS_KEY", value: fakeAWSSecret, kind: "AWS secret access key"},
		{name: "aws-secret-access-key", value: fakeAWSSecret, kind: "AWS secret access key"},
		{name: "MY_SECRET", value: fakeAWSSecret, kind: "40 characters of base64"},
		{value: fakePEM, kind: "private key", shown: "-----BEGIN …PRIVATE KEY-----"},
		{value: "-----BEGIN PRIVATE KEY-----\nMIIE", kind: "private key"},
		{value: "-----BEGIN OPENSSH PRIVATE KEY-----", kind: "private key"},
		{value: fakeGitHub, kind: "GitHub", shown: "ghp_…"},
		{value: "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", kind: "GitHub", shown: "github_pat_…"},
		{value: "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl", kind: "Slack", shown: "xoxb-…"},
		{value: "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567", kind: "Hugging Face", shown: "hf_…"},
		{value: fakeJWT, kind: "JSON Web Token", shown: "eyJ…"},
		{value: "Bearer 3f9a7c1e5b2d4a6f", kind: "bearer token", shown: "Bearer …"},
		{value: "Authorization: Bearer abc.def-ghi_jkl0", kind: "bearer token"},
		{value: "Authorization: Basic dXNlcjpwYXNzd29yZA==", kind: "Authorization header"},
		{value: "https://trainer:s3cr3tpass@git.example.com/ml/repo.git", kind: "URL with a password", shown: ""},
		{value: "s3://u:p@h", kind: "URL with a password"},
		{name: "HF_TOKEN", value: "AbCdEfGhIjKlMnOpQrStUv0123", kind: "generated value"},
		{name: "WANDB_API_KEY", value: "0123456789abcdef0123456789abcdef01234567", kind: "generated value"},
		{name: "DB_PASSWORD", value: "Xk29sLq0Pz8Wm3Nv7Rt1", kind: "generated value"},

		// Near misses: none of these is a credential.
		{value: "sha256:3b1c9e8f0a7d2c4b6e5f1a0d9c8b7a6e5f4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b"},
		{value: "public.ecr.aws/neuron/pytorch-training-neuronx@sha256:3b1c9e8f0a7d2c4b6e5f1a0d9c8b7a6e5f4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b"},
		{value: "0f8fad5b-d9cb-469f-a165-70867728950e"},                         // a UUID
		{value: "20261205T141500Z-3f9a7c"},                                      // a run ID
		{value: "X" + fakeKeyID},                                                // AKIA inside a longer token
		{value: fakeKeyID + "5"},                                                // 21 characters
		{value: "AKIAz7q4m2xk9plr3twb"},                                         // not upper case
		{value: "AIDAZ7Q4M2XK9PLR3TWB"},                                         // a user ID, not a key
		{value: fakeAWSSecret},                                                  // 40 characters, but nothing says secret
		{name: "GIT_COMMIT", value: "3b1c9e8f0a7d2c4b6e5f1a0d9c8b7a6e5f4d3c2b"}, // a commit
		{name: "MODEL_SHA", value: fakeAWSSecret},
		{name: "AWS_SECRET_ACCESS_KEY", value: "$(AWS_SECRET_ACCESS_KEY)"},
		{name: "MAX_TOKENS", value: "4096"},
		{name: "TOKENIZER", value: "meta-llama/Llama-3.1-8B-Instruct"},
		{name: "HF_TOKEN_PATH", value: "/var/run/secrets/hf/token"},
		{name: "SECRET_NAME", value: "ml-training-s3-credentials"},
		{name: "DB_PASSWORD", value: "changeme"},
		{value: "-----BEGIN CERTIFICATE-----\nMIIC"},
		{value: "-----BEGIN PUBLIC KEY-----\nMIIB"},
		{value: "Bearer $(API_TOKEN)"},
		{value: "Authorization: Bearer ${TOKEN}"},
		{value: "Authorization: Negotiate $(TICKET)"},
		{value: "Authorization: Bearer {{ .token }}"},
		{value: "Bearer <token>"},
		{value: "bearer short"},
		{value: "the Bearer information-rich"},
		{value: "Authorization: required"},
		{value: "https://git.example.com/ml/repo.git"},
		{value: "https://$(GIT_USER):$(GIT_TOKEN)@git.example.com/ml/repo.git"},
		{value: "s3://ml-artifacts/flows"},
		{value: "ghp_short"},
		{value: "eyJhbGciOiJIUzI1NiJ9"}, // a JSON header alone
		{value: "torchrun --nproc-per-node 32 train.py"},
	} {
		c, ok := Detect(tc.name, tc.value)
		switch {
		case tc.kind == "" && ok:
			t.Errorf("%s=%q: detected as %s, want nothing", tc.name, tc.value, c.Kind)
		case tc.kind != "" && !ok:
			t.Errorf("%s=%q: not detected, want %s", tc.name, tc.value, tc.kind)
		case ok && !strings.Contains(c.Kind, tc.kind):
			t.Errorf("%s=%q: detected as %s, want %s", tc.name, tc.value, c.Kind, tc.kind)
		case ok && tc.shown != "" && c.Shown != tc.shown:
			t.Errorf("%s=%q: shows %q, want %q", tc.name, tc.value, c.Shown, tc.shown)
		}
		if ok && len(c.Shown) > 0 && strings.Contains(tc.value, c.Shown) && len(c.Shown) >= len(tc.value)/2 {
			t.Errorf("%s=%q: shows %q, too much of the value", tc.name, tc.value, c.Shown)
		}
	}
}

func TestArgCredential(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		i    int
		want bool
	}{
		{argv: []string{"aws", "configure", "set", "aws_secret_access_key", fakeAWSSecret}, i: 4, want: true},
		{argv: []string{"sync", "--aws-secret-access-key", fakeAWSSecret}, i: 2, want: true},
		{argv: []string{"sync", "--aws-secret-access-key=" + fakeAWSSecret}, i: 1, want: true},
		{argv: []string{"login", "--token", "AbCdEfGhIjKlMnOpQrStUv0123"}, i: 2, want: true},
		{argv: []string{"curl", "-H", "Authorization: Bearer 3f9a7c1e5b2d4a6f", "https://api.example.com"}, i: 2, want: true},
		{argv: []string{"curl", "-H", "Authorization: Bearer $(API_TOKEN)", "https://api.example.com"}, i: 2},
		{argv: []string{"train", "--max-tokens", "4096"}, i: 2},
		{argv: []string{"train", "--checkpoint-sha", "3b1c9e8f0a7d2c4b6e5f1a0d9c8b7a6e5f4d3c2b"}, i: 2},
		{argv: []string{"train", "--tokenizer", "meta-llama/Llama-3.1-8B-Instruct"}, i: 2},
	} {
		if _, got := InArgs(tc.argv, tc.i); got != tc.want {
			t.Errorf("%q [%d]: credential %v, want %v", tc.argv, tc.i, got, tc.want)
		}
	}
}

// TestGoldenHoldNoCredential runs the detector over every value of every golden
// file: image references and digests, UUIDs, run IDs, DAG code. None is a
// credential, and none may be taken for one.
func TestGoldenHoldNoCredential(t *testing.T) {
	root := filepath.Join("..", "..", "golden", "testdata")
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		// An env entry spans two lines (name: N, then value: V): V is N's value.
		lastName := ""
		for i, line := range strings.Split(string(data), "\n") {
			name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok {
				name, value = "", line
			}
			name = strings.Trim(name, `-"' `)
			switch name {
			case "name":
				lastName = strings.Trim(strings.TrimSpace(value), `"',`)
			case "value":
				name = lastName
			}
			if c, ok := Detect(name, strings.Trim(strings.TrimSpace(value), `"',`)); ok {
				t.Errorf("%s:%d: taken for %s: %s", path, i+1, c.Kind, line)
			}
			if c, ok := Detect("", line); ok {
				t.Errorf("%s:%d: taken for %s: %s", path, i+1, c.Kind, line)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no golden files under %s", root)
	}
}
