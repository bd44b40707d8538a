package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// apacheLicenseSHA256 is the SHA-256 of the Apache License 2.0 as the
// Apache Software Foundation publishes it (LICENSE-2.0.txt).
const apacheLicenseSHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

// TestReleaseArchivesCarryTheLicense checks that LICENSE is the standard
// Apache-2.0 text and that every archive goreleaser.yaml builds lists it
// by name, so that a release cannot ship without it.
func TestReleaseArchivesCarryTheLicense(t *testing.T) {
	license, err := os.ReadFile(repoRoot + "/LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(license); hex.EncodeToString(sum[:]) != apacheLicenseSHA256 {
		t.Errorf("LICENSE is not the Apache License 2.0 text, unchanged (sha256 %x)", sum)
	}
	data, err := os.ReadFile(repoRoot + "/goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Archives []struct {
			ID    string `yaml:"id"`
			Files []any  `yaml:"files"`
		} `yaml:"archives"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Archives) == 0 {
		t.Fatal("goreleaser.yaml defines no archives")
	}
	for _, a := range cfg.Archives {
		var names []string
		for _, f := range a.Files {
			switch f := f.(type) {
			case string:
				names = append(names, f)
			case map[string]any:
				if src, ok := f["src"].(string); ok {
					names = append(names, src)
				}
			}
		}
		for _, want := range []string{"LICENSE", "README.md"} {
			if !slices.Contains(names, want) {
				t.Errorf("archive %q does not list %s in its files (%q)", a.ID, want, names)
			}
		}
	}
}
