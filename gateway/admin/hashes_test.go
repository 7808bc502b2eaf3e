package admin

import (
	"golang.org/x/crypto/bcrypt"

	"nacos-lockd/gateway/auth"
)

// fastHashes keeps -race runs quick; the hashes are still bcrypt.
var fastHashes = auth.WithPasswordCost(bcrypt.MinCost)
