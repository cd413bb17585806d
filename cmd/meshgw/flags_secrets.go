package main

import (
	"errors"
	"io/fs"
	"os"
	"strings"
)

// Secrets can come from a file (--admin-api-key-file, --mesh-encrypt-key-file) so that they stay
// out of /proc/PID/cmdline, which every local user can read; the environment variables keep
// working. A file's content is never echoed: errors name the file and what is wrong with it.

// maxKeyFile bounds what a key file may hold; a key is a few dozen bytes.
const maxKeyFile = 64 << 10

// keyFromFile fills *key from the file named by the flag fileFlag when path is set. The key's
// own flag (keyFlag) and the file are exclusive. The file's trailing newline (what an editor or
// `echo` leaves) is dropped; an unreadable, empty or oversized file is a usage error.
func keyFromFile(key *string, keyFlag, fileFlag, path string) error {
	if path == "" {
		return nil
	}
	if *key != "" {
		return usagef("--%s and --%s are both set (or $%s and $%s); give one", keyFlag, fileFlag, envName(keyFlag), envName(fileFlag))
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return valuef(fileFlag, "%s: cannot read it: %s", path, pathErr(err))
	case !st.Mode().IsRegular():
		return valuef(fileFlag, "%s is not a regular file", path)
	case st.Size() > maxKeyFile:
		return valuef(fileFlag, "%s holds %d bytes; a key file holds one key", path, st.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return valuef(fileFlag, "%s: cannot read it: %s", path, pathErr(err))
	}
	k := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if strings.TrimSpace(k) == "" {
		return valuef(fileFlag, "%s is empty", path)
	}
	*key = k
	return nil
}

// pathErr is err without the path os puts in it (the message names the path once).
func pathErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
