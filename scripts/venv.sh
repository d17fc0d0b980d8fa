# venv.sh - sourced by scripts/test.sh and scripts/vm-test.sh: the Python
# test tools (scripts/test-requirements.txt) in a private virtual
# environment, build/venv, (re)installed when it is missing or was made
# from other requirements; its bin/ goes first on PATH.  Also the wheels
# the Python-environment tests install with no index (scripts/test-wheels.txt,
# for Debian 12's python3: CPython 3.11 on x86_64) in build/test-wheels.
# Only from the repository's root: elsewhere it would make a stray
# build/venv where it stands.
if [ ! -r scripts/test-requirements.txt ]; then
	echo "venv.sh: source it from the repository's root (no scripts/test-requirements.txt in $(pwd))" >&2
	return 1 2>/dev/null || exit 1
fi
venv=build/venv
if [ ! -x "$venv/bin/python3" ] || ! cmp -s scripts/test-requirements.txt "$venv/pbx-requirements.txt"; then
	mkdir -p build
	[ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
	"$venv/bin/pip" install -q --disable-pip-version-check -r scripts/test-requirements.txt
	cp scripts/test-requirements.txt "$venv/pbx-requirements.txt"
fi
wheels=build/test-wheels
if ! cmp -s scripts/test-wheels.txt "$wheels/pbx-wheels.txt"; then
	rm -rf "$wheels"
	mkdir -p "$wheels"
	"$venv/bin/pip" download -q --disable-pip-version-check --only-binary=:all: \
		--platform manylinux2014_x86_64 --python-version 3.11 --implementation cp \
		-d "$wheels" -r scripts/test-wheels.txt
	cp scripts/test-wheels.txt "$wheels/pbx-wheels.txt"
fi
PATH="$(pwd)/$venv/bin:$PATH"
export PATH
