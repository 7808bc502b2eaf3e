package procs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// JavaTestClasspath compiles an interop/java module (test-compile) and
// returns the classpath that runs its test classes: target/test-classes
// and every test-scope dependency. Maven writes the list to outDir.
// The chaos suite and the bench's Java targets start their mains with it.
func JavaTestClasspath(ctx context.Context, module, outDir string) (string, error) {
	module, err := filepath.Abs(module)
	if err != nil {
		return "", err
	}
	cpFile := filepath.Join(outDir, "java-classpath.txt")
	build := exec.CommandContext(ctx, "mvn", "-B", "-q", "-ntp", "-f", filepath.Join(module, "pom.xml"), "test-compile",
		"dependency:build-classpath", "-Dmdep.outputFile="+cpFile, "-Dmdep.includeScope=test")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mvn test-compile in %s: %w\n%s", module, err, out)
	}
	deps, err := os.ReadFile(cpFile)
	if err != nil {
		return "", fmt.Errorf("read the classpath Maven wrote: %w", err)
	}
	return filepath.Join(module, "target", "test-classes") + string(os.PathListSeparator) + strings.TrimSpace(string(deps)), nil
}
