package valkey

import (
	"crypto/sha1"
	"encoding/hex"
)

// digest is the SHA-1 a server names a script by (EVALSHA).
func digest(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}
