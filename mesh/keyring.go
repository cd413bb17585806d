package mesh

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/memberlist"
)

// ErrNotEncrypted is returned by SetEncryptKeys on a mesh started without a key: turning
// encryption on later would cut this gateway off from its peers until each did the same.
var ErrNotEncrypted = errors.New("mesh: gossip is not encrypted (started without --mesh-encrypt-key); keys can only be rotated on an encrypted mesh")

// ParseEncryptKeys decodes a key list: base64 AES keys separated by commas, spaces or newlines
// (a key file with one key per line), the primary first. Its errors name the key's position,
// never the key.
func ParseEncryptKeys(s string) ([][]byte, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	if len(fields) == 0 {
		return nil, errors.New("--mesh-encrypt-key holds no key")
	}
	keys := make([][]byte, 0, len(fields))
	for i, f := range fields {
		k, err := ParseEncryptKey(f)
		if err != nil {
			if len(fields) > 1 {
				return nil, fmt.Errorf("key %d of %d: %w", i+1, len(fields), err)
			}
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// newKeyring is memberlist's keyring of keys, keys[0] the primary: it encrypts with the primary
// and decrypts with any of them.
func newKeyring(keys [][]byte) (*memberlist.Keyring, error) {
	return memberlist.NewKeyring(keys[1:], keys[0])
}

// SetEncryptKeys rotates the gossip keys without a restart (memberlist's keyring, as Consul's
// `keyring -install/-use/-remove`): it installs every key of s (ParseEncryptKeys), makes the
// first the primary, and removes the keys s no longer lists. A rolling rotation takes three
// rounds over the fleet, each a key file change and a SIGHUP on every gateway: add the new key
// after the old one; put the new key first; drop the old key. At every step each gateway
// decrypts what every other sends.
func (m *Mesh) SetEncryptKeys(s string) error {
	keys, err := ParseEncryptKeys(s)
	if err != nil {
		return err
	}
	kr := m.keyring
	if kr == nil {
		return ErrNotEncrypted
	}
	for _, k := range keys {
		if err := kr.AddKey(k); err != nil {
			return fmt.Errorf("mesh: install a gossip key: %w", err)
		}
	}
	if err := kr.UseKey(keys[0]); err != nil {
		return fmt.Errorf("mesh: make the first key primary: %w", err)
	}
	for _, old := range kr.GetKeys() {
		listed := false
		for _, k := range keys {
			listed = listed || bytes.Equal(k, old)
		}
		if !listed {
			if err := kr.RemoveKey(old); err != nil {
				return fmt.Errorf("mesh: remove a gossip key: %w", err)
			}
		}
	}
	m.log.Info("gossip keys changed", "keys", len(keys))
	return nil
}
