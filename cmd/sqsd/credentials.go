package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// credentialsName is the credentials file the server keeps in its data directory when no
// -credentials names one.
const credentialsName = "credentials"

// loadCredentials reads a credentials file: one "ACCESS_KEY_ID SECRET_ACCESS_KEY" a line,
// separated by blanks; blank lines and lines beginning with # are skipped. Anything else,
// a key given twice, or a file of no key is an error naming the line.
func loadCredentials(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := parseCredentials(data)
	if err != nil {
		return nil, fmt.Errorf("sqsd: credentials file %s: %w", path, err)
	}
	return keys, nil
}

func parseCredentials(data []byte) (map[string]string, error) {
	keys := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) != 2:
			return nil, fmt.Errorf("line %d: not \"ACCESS_KEY_ID SECRET_ACCESS_KEY\"", n)
		case keys[f[0]] != "":
			return nil, fmt.Errorf("line %d: access key %s given twice", n, f[0])
		}
		keys[f[0]] = f[1]
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no access key in it")
	}
	return keys, nil
}

// generated is set when the server made its credentials at this start (announce prints
// them).
type generated struct{ keyID, secret, path string }

// credentials returns the front end's Config.Credentials: -no-auth, none (no signature is
// checked); -credentials, that file's keys; neither, the data directory's credentials
// file, with a pair generated into it at the first start.
//
// Why generate rather than check nothing by default: every AWS SDK and the CLI sign every
// request anyway and need some key to do it, so a printed key costs a newcomer one export
// line; a server that checks nothing is open to whoever reaches its port, which a user who
// runs "a queue server" on a shared machine or binds it beyond loopback does not expect.
// -no-auth is there, loudly, for those who want the emulators' behaviour.
func (s *server) credentials(cfg config) (func(string) (string, bool), error) {
	if cfg.noAuth {
		return nil, nil
	}
	path := cfg.credentials
	if path == "" {
		path = filepath.Join(s.dir, credentialsName)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			g, err := generateCredentials(s.dir)
			if err != nil {
				return nil, err
			}
			s.generated = &g
		}
	}
	keys, err := loadCredentials(path)
	if err != nil {
		return nil, err
	}
	s.credentialsPath = path
	s.keys = len(keys)
	return func(id string) (string, bool) {
		secret, ok := keys[id]
		return secret, ok
	}, nil
}

// generateCredentials writes a new pair into dir's credentials file (mode 0600).
func generateCredentials(dir string) (generated, error) {
	const upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	pick := func(alphabet string, n int) string {
		b := make([]byte, n)
		rand.Read(b)
		for i := range b {
			b[i] = alphabet[int(b[i])%len(alphabet)]
		}
		return string(b)
	}
	g := generated{keyID: "AKSQSD" + pick(upper, 14), secret: pick(alnum, 40), path: filepath.Join(dir, credentialsName)}
	data := fmt.Appendf(nil, "# sqsd's credentials: ACCESS_KEY_ID SECRET_ACCESS_KEY, one pair a line.\n%s %s\n", g.keyID, g.secret)
	return g, writeFileAtomic(dir, credentialsName, credentialsName+".tmp", data, 0o600)
}

// announce tells the user, on out, what they need to connect, and says loudly when no
// signature is checked.
func (s *server) announce(cfg config, out io.Writer) error {
	var err error
	switch {
	case cfg.noAuth:
		s.logger.Warn("sqsd: -no-auth: NO SIGNATURE IS CHECKED; anyone who reaches " + cfg.baseURL + " may call every action")
		_, err = fmt.Fprintf(out, "sqsd: WARNING: no signature is checked (-no-auth): any access key works, for anyone who reaches %s\n", cfg.baseURL)
	case s.generated != nil:
		_, err = fmt.Fprintf(out, "sqsd: generated credentials into %s; every request must be signed with them:\n"+
			"  export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s AWS_DEFAULT_REGION=us-east-1\n",
			s.generated.path, s.generated.keyID, s.generated.secret)
	default:
		s.logger.Info("sqsd: checking every request's signature", "credentials", s.credentialsPath, "keys", s.keys)
	}
	return err
}
