# shellcheck shell=sh
# templates/bootstrap/35-software.sh - the tasks' software: environment
# packages (systemd) and pbx-train.
# Sourced by templates/bootstrap.sh (contract: templates/README.md).

# ---- python3 with venv and ch-run, for the tasks' environments; on the
# head skopeo and umoci, which pull registry images
if [ "$MODE" = systemd ] && [ "$ROLE" != head ]; then
	ensure_pkgs "task environments" "$ENV_PKGS"
elif [ "$MODE" = systemd ]; then
	ensure_pkgs "registry images" "$HEAD_ENV_PKGS"
fi

# ---- pbx-train, for `train:` tasks (on a node body in ROOT/usr/local/bin,
# which the env.sh pbx renders puts on PATH)
if [ "$MODE" = direct ]; then
	if [ -n "${PBX_TRAIN_BIN:-}" ]; then
		[ -x "$PBX_TRAIN_BIN" ] || die "PBX_TRAIN_BIN ($PBX_TRAIN_BIN) is not an executable file"
		# a copy in the body, not a link to the build: the task user must
		# run it, and the build may lie in a private directory (/root);
		# its CUDA backend where pbx-train looks (../lib/pbx)
		[ ! -L "$ROOT/usr/local/bin/pbx-train" ] || rm -f "$ROOT/usr/local/bin/pbx-train"
		install_file "$PBX_TRAIN_BIN" "$ROOT/usr/local/bin/pbx-train" 0755
		if [ -f "${PBX_TRAIN_BIN%/*}/pbx-train-cuda.so" ]; then
			install_file "${PBX_TRAIN_BIN%/*}/pbx-train-cuda.so" "$ROOT/usr/local/lib/pbx/pbx-train-cuda.so" 0644
		fi
	fi
elif [ -f "$STAGE_DIR/pbx-train" ] && ! staged_for_here pbx-train; then
	log "pbx-train not installed: built on '$built', this node is '$here' (build it here: cmake -S SRC -B build && cmake --build build --target pbx-train)"
elif [ -f "$STAGE_DIR/pbx-train" ]; then
	# Its runtime libraries (Debian 12 / Ubuntu 22.04 names) and mpirun.
	ensure_pkgs "pbx-train's runtime" "$TRAIN_PKGS"
	install_file "$STAGE_DIR/pbx-train" "$ROOT/usr/local/bin/pbx-train" 0755
	# its CUDA backend, a module found at ../lib/pbx beside the binary; it
	# loads where the image has the CUDA runtime, cuBLAS, cuDNN and NCCL
	if [ -f "$STAGE_DIR/pbx-train-cuda.so" ]; then
		install_file "$STAGE_DIR/pbx-train-cuda.so" "$ROOT/usr/local/lib/pbx/pbx-train-cuda.so" 0644
	fi
	train_version=$("$ROOT/usr/local/bin/pbx-train" --version) ||
		die "pbx-train does not run on this node (ldd $ROOT/usr/local/bin/pbx-train)"
	case $train_version in
	*"cannot load the CUDA backend"*)
		[ "$GPUS" -eq 0 ] ||
			log "pbx-train's CUDA backend does not load on this GPU node (device: cuda will fail; device: auto trains on the CPU): $train_version" ;;
	esac
fi
