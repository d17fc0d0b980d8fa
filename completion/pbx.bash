# pbx.bash - bash completion for pbx.  The candidates come from pbx itself
# (`pbx __complete WORD...`, src/cli/complete.c), so verbs, options, cluster
# names, templates, packages and PKG:TASK are always those of the pbx on
# PATH and of its store.  Installed by `cmake --install` as
# share/bash-completion/completions/pbx; or source this file.
_pbx() {
	local cur words cword out
	if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
		# PKG:TASK and --key=value stay one word
		_get_comp_words_by_ref -n := cur words cword
	else
		words=("${COMP_WORDS[@]}")
		cword=$COMP_CWORD
		cur=${COMP_WORDS[COMP_CWORD]}
	fi
	out=$("${words[0]}" __complete "${words[@]:1:cword}" 2>/dev/null) || return 0
	if [ "$out" = "__files__" ]; then
		compopt -o filenames 2>/dev/null
		local IFS=$'\n'
		COMPREPLY=($(compgen -f -- "$cur"))
		return 0
	fi
	local IFS=$'\n'
	COMPREPLY=($out)
	if declare -F __ltrim_colon_completions >/dev/null 2>&1; then
		__ltrim_colon_completions "$cur"
	fi
}
complete -F _pbx pbx
