package admin

import (
	"os"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"nacos-lockd/gateway/auth"
)

func TestMain(m *testing.M) {
	auth.PasswordCost = bcrypt.MinCost // keep -race runs quick; hashes are still bcrypt
	os.Exit(m.Run())
}
