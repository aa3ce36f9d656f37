package nginx

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// FindBinary returns the NGINX executable to run: flag if it is set, else
// "nginx" beside the running executable (bin/nginx beside bin/zonal), else
// "nginx" in $PATH. The error names everything it tried.
func FindBinary(flag string) (string, error) {
	var dir string
	if exe, err := os.Executable(); err == nil {
		dir = filepath.Dir(exe)
	}
	return findBinary(flag, dir)
}

func findBinary(flag, exeDir string) (string, error) {
	if flag != "" {
		if err := isExecutable(flag); err != nil {
			return "", fmt.Errorf("nginx binary: %w", err)
		}
		return filepath.Abs(flag)
	}
	var tried []string
	if exeDir != "" {
		beside := filepath.Join(exeDir, "nginx")
		if err := isExecutable(beside); err == nil {
			return beside, nil
		}
		tried = append(tried, beside)
	}
	if path, err := exec.LookPath("nginx"); err == nil {
		return filepath.Abs(path)
	}
	tried = append(tried, `"nginx" in $PATH`)
	return "", fmt.Errorf("no nginx binary: tried %s; build one with \"make nginx\" or give its path", strings.Join(tried, " and "))
}

func isExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}
