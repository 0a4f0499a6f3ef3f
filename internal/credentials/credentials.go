// Package credentials reads the secrets and TLS material that settings name by file
// path (--redis-password-file, --kafka-ca-file, --temporal-tls-cert …), so that every
// store's client gets them the same way and every error names the flag and the file.
// Secrets come from files, not flags, because a flag's value shows in process lists
// and shell histories.
package credentials

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Secret reads the secret in path, the value of setting flag (such as
// "--redis-password-file"). One trailing newline (or CRLF) is dropped, since editors
// and `echo` add one; the rest is the secret as is. An empty path returns "".
func Secret(flag, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s %s: cannot read it: %v; write the secret into that file, or drop %s", flag, path, unwrapPath(err), flag)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s %s is empty: write the secret into it, or drop %s", flag, path, flag)
	}
	return s, nil
}

// unwrapPath drops the path os errors repeat, so a message names the file once.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// TLSFiles name the files of a TLS client configuration and the settings they came
// from, for messages.
type TLSFiles struct {
	CAFile, CAFlag     string // PEM certificates to trust instead of the system roots
	CertFile, CertFlag string // PEM client certificate (mutual TLS)
	KeyFile, KeyFlag   string // its PEM private key
	ServerName         string // the name to verify the server's certificate against; default the dialled host
}

// Config builds the TLS client configuration: TLS 1.2 or later, the CA file's
// certificates as roots when given, and the client certificate when given (both
// files or neither).
func (f TLSFiles) Config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %v: give the PEM file of the CA that signed the server's certificate", f.CAFlag, f.CAFile, unwrapPath(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in the file: give the CA certificate in PEM (-----BEGIN CERTIFICATE-----)", f.CAFlag, f.CAFile)
		}
		c.RootCAs = pool
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s %s / %s %s: %v: give a PEM certificate and its PEM private key", f.CertFlag, f.CertFile, f.KeyFlag, f.KeyFile, unwrapPath(err))
		}
		c.Certificates = []tls.Certificate{cert}
	case f.CertFile != "":
		return nil, fmt.Errorf("%s %s needs %s: give the client certificate's private key too", f.CertFlag, f.CertFile, f.KeyFlag)
	case f.KeyFile != "":
		return nil, fmt.Errorf("%s %s needs %s: give the client certificate too", f.KeyFlag, f.KeyFile, f.CertFlag)
	}
	return c, nil
}
