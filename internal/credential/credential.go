// Package credential tells values that look like credentials from others: AWS
// access keys, private keys, bearer tokens and the token formats of well-known
// services, and, under a name that says its value is secret (AWS_SECRET_ACCESS_KEY,
// HF_TOKEN, --password), a value that looks generated. compile's lint warns of
// them; the local runtime keeps them out of what it writes. A credential is
// described by its kind and at most a prefix that every credential of the kind
// shares, never by its value.
package credential

import (
	"regexp"
	"strings"
	"sync"
)

// A Credential is what a value that looks like a secret looks like.
type Credential struct {
	// Kind names the shape found: "an AWS access key ID".
	Kind string
	// Shown is what a message may print of the value: a prefix that every
	// credential of the kind shares ("AKIA…"), or "" for nothing.
	Shown string
}

// The shapes of credentials recognised anywhere in a value. Each is a whole token:
// a shape inside a longer run of letters and digits (a digest, a UUID, a run ID)
// does not count. They are compiled at their first use, not when a program
// starts.
var credentialShapes = sync.OnceValue(func() []credentialShape {
	return []credentialShape{
		// AWS access key IDs: AKIA (long-term keys) or ASIA (temporary ones) and 16
		// uppercase letters or digits.
		{re: regexp.MustCompile(`(?:^|[^A-Za-z0-9])(AKIA|ASIA)([A-Z0-9]{16})(?:$|[^A-Za-z0-9])`), kind: "an AWS access key ID", shown: "${1}…", secret: 2},
		// PEM private keys of any algorithm (RSA, EC, OPENSSH, ENCRYPTED, PKCS#8),
		// the block withheld through its END line, or to the end of the text.
		{re: regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----((?s:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|.*))`), kind: "a private key (a PEM block)", shown: "-----BEGIN …PRIVATE KEY-----", secret: 1},
		// GitHub tokens: personal (ghp_), OAuth (gho_), user-to-server (ghu_),
		// server-to-server (ghs_) and refresh (ghr_) tokens, and fine-grained ones.
		{re: regexp.MustCompile(`(?:^|[^A-Za-z0-9_])(gh[pousr]_)([A-Za-z0-9]{36,})(?:$|[^A-Za-z0-9_])`), kind: "a GitHub token", shown: "${1}…", secret: 2},
		{re: regexp.MustCompile(`(?:^|[^A-Za-z0-9_])(github_pat_)([A-Za-z0-9_]{40,})`), kind: "a GitHub token", shown: "${1}…", secret: 2},
		// Slack bot, user, app, refresh and legacy tokens.
		{re: regexp.MustCompile(`(?:^|[^A-Za-z0-9])(xox[baprs]-)([A-Za-z0-9-]{10,})`), kind: "a Slack token", shown: "${1}…", secret: 2},
		// Hugging Face access tokens, which ML steps use to fetch gated models.
		{re: regexp.MustCompile(`(?:^|[^A-Za-z0-9_])(hf_)([A-Za-z0-9]{30,})(?:$|[^A-Za-z0-9_])`), kind: "a Hugging Face token", shown: "${1}…", secret: 2},
		// JSON Web Tokens: a JSON header and payload, base64url-encoded, and a signature.
		{re: regexp.MustCompile(`(?:^|[^A-Za-z0-9_-])(eyJ)([A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+)`), kind: "a JSON Web Token", shown: "${1}…", secret: 2},
		// HTTP credentials: a bearer token, or any Authorization header with a value.
		{re: regexp.MustCompile(`(?i)(?:^|[^A-Za-z0-9])bearer\s+(\S+)`), kind: "a bearer token", shown: "Bearer …", literal: 1, secret: 1},
		{re: regexp.MustCompile(`(?i)authorization\s*:\s*(?:[A-Za-z]+\s+)?(\S+)`), kind: "an Authorization header", shown: "Authorization: …", literal: 1, secret: 1},
		// A URL that holds a password: https://user:password@host. Redact writes
		// xxxxx in its place, as url.URL.Redacted does.
		{re: regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@$]+:([^/\s@$({][^/\s@]*)@`), kind: "a URL with a password", shown: "", secret: 1, mask: urlMask},
	}
})

// urlMask is what stands for a URL's password, as url.URL.Redacted writes it.
const urlMask = "xxxxx"

// A credentialShape is a credential's shape: its pattern, what it is, and what
// of it is shown.
type credentialShape struct {
	re    *regexp.Regexp
	kind  string
	shown string
	// literal, when not 0, is the submatch that holds the credential itself,
	// which must be a value and not a reference to one.
	literal int
	// secret is the submatch that Redact withholds: the credential less the
	// prefix that every credential of the kind shares.
	secret int
	// mask is what Redact writes in the secret's place, "… (withheld)" when "".
	mask string
}

// literal reports whether a token is a value, not a reference to one or a word:
// 8 characters or more, among them a digit, as generated tokens have. $(TOKEN),
// ${TOKEN}, $TOKEN, {{ .token }} and <token> are left alone, as the secret they
// stand for is not in the flow, and so is prose ("Authorization: required").
func literal(token string) bool {
	return len(token) >= 8 && !strings.ContainsAny(token, "$(){}<>") && strings.ContainsAny(token, "0123456789")
}

// secretWords are the words of a variable or flag name that say its value is
// secret: HF_TOKEN, DB_PASSWORD, --aws-secret-access-key. Words, not substrings:
// MAX_TOKENS and TOKENIZER are not secrets.
var secretWords = map[string]bool{
	"SECRET": true, "TOKEN": true, "PASSWORD": true, "PASSWD": true, "PASSPHRASE": true,
	"APIKEY": true, "CREDENTIAL": true, "CREDENTIALS": true,
}

// secretKeyWords precede KEY in a name whose value is a secret: API_KEY,
// ACCESS_KEY, PRIVATE_KEY, SECRET_KEY.
var secretKeyWords = map[string]bool{"API": true, "ACCESS": true, "PRIVATE": true, "SECRET": true, "AUTH": true}

// secretName reports whether a variable or flag name says its value is secret.
func secretName(name string) bool {
	words := strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool {
		return (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	})
	for i, w := range words {
		if secretWords[w] || (w == "KEY" && i > 0 && secretKeyWords[words[i-1]]) {
			return true
		}
	}
	return false
}

// awsSecret is the shape of an AWS secret access key: 40 characters of base64.
// Digests and commit hashes have it too, so it counts only where a name says the
// value is secret.
var awsSecret = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9/+]{40}$`) })

// keyLike reports whether a value under a secret name looks like a generated key
// rather than a setting: at least 20 characters of base64 or hex, mixing upper
// and lower case letters and digits, or 32 hex digits and more (API keys such as
// Weights & Biases').
func keyLike(v string) bool {
	if len(v) < 20 {
		return false
	}
	var upper, lower, digit, hex = false, false, false, true
	for _, r := range v {
		switch {
		case r >= 'A' && r <= 'Z':
			upper = true
			hex = false
		case r >= 'a' && r <= 'z':
			lower = true
			hex = hex && r <= 'f'
		case r >= '0' && r <= '9':
			digit = true
		case strings.ContainsRune("+/=_-", r):
			hex = false
		default:
			return false
		}
	}
	return (upper && lower && digit) || (hex && len(v) >= 32)
}

// Detect returns what value looks like, if it looks like a credential.
// name is the variable or flag the value is given to, "" for none: under a name
// such as AWS_SECRET_ACCESS_KEY or HF_TOKEN, a key-like value counts too.
func Detect(name, value string) (Credential, bool) {
	if c, ok := detectShape(value); ok {
		return c, true
	}
	return detectByName(name, value)
}

// detectShape is Detect by the shapes of credentials alone.
func detectShape(value string) (Credential, bool) {
	if len(value) < minShape || !hinted(value) {
		return Credential{}, false
	}
	for _, shape := range credentialShapes() {
		m := shape.re.FindStringSubmatchIndex(value)
		if m == nil {
			continue
		}
		if g := shape.literal; g > 0 && !literal(value[m[2*g]:m[2*g+1]]) {
			continue
		}
		shown := string(shape.re.ExpandString(nil, shape.shown, value, m))
		return Credential{Kind: shape.kind, Shown: shown}, true
	}
	return Credential{}, false
}

// minShape is the length of the shortest value a shape matches: a URL with a
// password, a://u:p@.
const minShape = 8

// hints are what every value of some shape holds, lower-cased: a value that
// holds none is no shape's, and the expressions need not read it. Most values
// (paths, numbers, names) hold none, which keeps the lint of a flow of many
// steps cheap.
var hints = []string{"akia", "asia", "private key", "gh", "xox", "hf_", "eyj", "bearer", "authorization", "://"}

func hinted(value string) bool {
	lower := strings.ToLower(value)
	for _, h := range hints {
		if strings.Contains(lower, h) {
			return true
		}
	}
	return false
}

// detectByName is Detect for a value of no shape: a key-like value under a
// secret's name.
func detectByName(name, value string) (Credential, bool) {
	if name == "" || !secretName(name) {
		return Credential{}, false
	}
	v := strings.TrimSpace(value)
	switch {
	case awsSecret().MatchString(v) && strings.Contains(strings.ToUpper(name), "AWS"):
		return Credential{Kind: "an AWS secret access key"}, true
	case awsSecret().MatchString(v) && !allHex(v):
		return Credential{Kind: "a secret key (40 characters of base64, as AWS secret access keys are)"}, true
	case keyLike(v):
		return Credential{Kind: "a secret key (a generated value under a secret's name)"}, true
	}
	return Credential{}, false
}

func allHex(v string) bool {
	return strings.Trim(v, "0123456789abcdef") == "" || strings.Trim(v, "0123456789ABCDEF") == ""
}

// InArgs returns what argument i of argv looks like, if it looks like a
// credential: by its shape, or as the value of a flag or key whose name says it
// is secret (--aws-secret-access-key KEY, --token=KEY, aws_secret_access_key KEY).
func InArgs(argv []string, i int) (Credential, bool) {
	arg := argv[i]
	name := ""
	if flag, value, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(flag, "-") {
		name, arg = flag, value
	} else if i > 0 && !strings.ContainsAny(argv[i-1], "= \t") {
		// The argument before: a flag (--token KEY), or a key as aws configure
		// set takes one (aws_secret_access_key KEY).
		name = argv[i-1]
	}
	return Detect(strings.TrimLeft(name, "-"), arg)
}

// Withheld is what a message prints in place of the credential's value:
// "AKIA… (withheld)".
func (c Credential) Withheld() string {
	if c.Shown == "" {
		return "(withheld)"
	}
	return c.Shown + " (withheld)"
}

// Looks says what the credential looks like, without its value: "looks like an
// AWS access key ID (AKIA…)".
func (c Credential) Looks() string {
	if c.Shown == "" {
		return "looks like " + c.Kind + " (value withheld)"
	}
	return "looks like " + c.Kind + " (" + c.Shown + ")"
}
