# Shared by the build scripts; sourced, not run.

# module_inputs TOP prints, sorted, the files the zonal module is built from:
# everything under nginxmod/ and the shared C reader of cgo/table. A change
# to any of them rebuilds the module.
module_inputs() {
	(
		cd "$1" && {
			find nginxmod -type f
			find cgo/table -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \)
		} 2>/dev/null | LC_ALL=C sort
	)
}
