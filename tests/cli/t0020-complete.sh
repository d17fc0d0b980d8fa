#!/bin/sh
# t0020-complete.sh - shell completion: `pbx __complete WORD...`
# offers verbs, subcommands and options from the verb tables, an option's
# value by its metavar (-t TEMPLATE), positional arguments by their kind
# (clusters from the store, templates from the configuration, packages,
# PKG:TASK, images, files), nothing after "--"; and the bash and zsh
# scripts in completion/ hand those to the shells (bash with Debian's
# bash-completion, zsh with its compadd and _files stubbed: completion
# needs a terminal there).
. "$(dirname "$0")/lib.sh"
trap 'rm -rf "$TEST_TMP"' EXIT
mkdir -p "$PBX_HOME"
cat >"$PBX_HOME/config.yaml" <<'CONFIG'
clusters:
  gpu-tmpl:
    cloud: local
    node_groups: [{ name: node, count: 1 }]
  cpu-tmpl:
    cloud: local
    node_groups: [{ name: node, count: 1 }]
CONFIG
chmod 600 "$PBX_HOME/config.yaml"
comp() { "$PBX" __complete "$@" | tr '\n' ' ' | sed 's/ $//'; }

is "$(comp "")" "cluster image parrun run state ls log cancel rerun report harvest publish pull forget cache config help version" \
	"verbs"
is "$(comp cl "")" "start price list show ssh disconnect exec resize stop forget-host power record adopt runs data gc registry-login registry-logout" "cluster's subcommands (a unique prefix is the verb)"
is "$(comp cluster st)" "start stop" "subcommands by prefix"
is "$(comp cluster start --)" "--template --dry-run --json --autostop --help" "options from the table"
is "$(comp cluster start -t "")" "gpu-tmpl cpu-tmpl" "-t TEMPLATE: the configuration's templates"
is "$(comp cluster start -t gpu-tmpl "")" "gpu-tmpl cpu-tmpl" "an option's value is not a positional"
is "$(comp -C "$PBX_HOME/config.yaml" cluster start c)" "cpu-tmpl" "-C FILE before the verb is read"
is "$(comp parrun "")" "__files__" "parrun's first argument is a file"
is "$(comp cluster stop "")" "" "no cluster in the store yet (and no store: none is made)"
[ ! -e "$PBX_HOME/pbx.db" ]
ok $? "completion writes no store"

# a store with clusters, a package with 3 tasks and an image
"$PBX" cluster list >/dev/null
sqlite3 "$PBX_HOME/pbx.db" <<'SQL'
INSERT INTO clusters(name, cloud, state, template_json, created, updated, uid)
  VALUES ('alpha', 'local', 'up', '{}', 1, 1, 'a1'), ('beta', 'gce', 'stopped', '{}', 1, 1, 'b1'),
         ('gone', 'local', 'deleted', '{}', 1, 1, 'g1');
INSERT INTO packages(id, short_id, name, experiment_path, experiment_text, user, host, ntasks, created)
  VALUES ('abcdef012345ffff', 'abcdef012345', 'sweep', 'e.yaml', '', 'u', 'h', 3, 1);
INSERT INTO submissions(package_id, cluster_id, remote_dir, resources_json, state, created)
  VALUES ('abcdef012345ffff', 1, 'r', '{}', 'submitted', 1);
INSERT INTO tasks(submission_id, idx, params_json, state, updated)
  VALUES (1, 0, '{"lr": "0.1", "width": "64"}', 'COMPLETED', 1), (1, 1, '{"lr": "0.1", "width": "128"}', 'FAILED', 1),
         (1, 2, '{"lr": "0.01", "width": "64", "seed": "3"}', 'RUNNING', 1);
INSERT INTO images(name, uid, cloud, project, source_image, template, state, created, updated)
  VALUES ('img-a', 'i1', 'gce', 'p', 's', 't', 'ready', 1, 1);
SQL
is "$(comp cluster stop "")" "alpha beta" "live clusters, not deleted ones"
is "$(comp cluster show b)" "beta" "by prefix"
is "$(comp cluster start "")" "alpha beta gpu-tmpl cpu-tmpl" "start: clusters and templates"
is "$(comp parrun e.yaml "")" "alpha beta" "parrun's second argument: a cluster"
is "$(comp state "")" "abcdef012345 sweep" "packages: short ids and names"
is "$(comp log sweep:)" "sweep:0 sweep:1 sweep:2" "PKG:TASK: the tasks of its latest submission"
is "$(comp rerun abcdef:1)" "abcdef:1" "by prefix, with the package as typed"
is "$(comp image delete "")" "img-a" "images"
is "$(comp report -g "")" "lr seed width" "report -g: the parameters the store's tasks have"
is "$(comp report -g lr,)" "lr,seed lr,width" "after a comma, the ones not listed yet"
is "$(comp report --x w)" "width" "--x PARAM by prefix"
is "$(comp cluster exec alpha -- "")" "" "nothing after --: a command for the node"
is "$(comp help cl)" "cluster" "help VERB"
is "$(comp nosuchverb "")" "" "an unknown verb: nothing"

# bash, with Debian's bash-completion helpers
bash_comp() {   # bash_comp LINE: what bash offers at its end
	PATH="$(dirname "$PBX"):$PATH" bash -c '
		. /usr/share/bash-completion/bash_completion
		. "$1"
		COMP_LINE=$2
		COMP_POINT=${#COMP_LINE}
		read -ra COMP_WORDS <<<"$2"
		case $2 in *" ") COMP_WORDS+=("") ;; esac
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		_pbx
		printf "%s\n" "${COMPREPLY[@]}"' sh "$PBX_SOURCE_DIR/completion/pbx.bash" "$1" | tr '\n' ' ' | sed 's/ $//'
}
if [ -r /usr/share/bash-completion/bash_completion ]; then
	is "$(bash_comp "pbx cluster s")" "start show ssh stop" "bash: subcommands"
	is "$(bash_comp "pbx log sweep:")" "0 1 2" "bash: PKG:TASK stays one word (the part after : is offered)"
	mkdir -p "$TEST_TMP/files" && touch "$TEST_TMP/files/exp.yaml"
	is "$(cd "$TEST_TMP/files" && bash_comp "pbx parrun ex")" "exp.yaml" "bash: a FILE is completed by the shell"
else
	ok 1 "bash-completion is not installed (scripts/install-deps.sh installs it)"
fi

# zsh: the function's logic with compadd and _files stubbed
zsh_comp() {   # zsh_comp WORD...: what _pbx hands to compadd
	PATH="$(dirname "$PBX"):$PATH" zsh -fc '
		compadd() { while [[ $1 == -* ]]; do shift; done; print -rl -- "$@"; }
		_files() { print -r -- "(files)"; }
		words=(pbx "$@[2,-1]"); CURRENT=$#words
		source "$1"' zsh "$PBX_SOURCE_DIR/completion/_pbx" "$@" | tr '\n' ' ' | sed 's/ $//'
}
if command -v zsh >/dev/null 2>&1; then
	is "$(zsh_comp cluster st)" "start stop" "zsh: subcommands"
	is "$(zsh_comp log sweep:)" "sweep:0 sweep:1 sweep:2" "zsh: PKG:TASK"
	is "$(zsh_comp parrun "")" "(files)" "zsh: a FILE goes to _files"
	is "$(zsh_comp cluster stop zzz)" "" "zsh: no candidate, nothing added"
else
	ok 1 "zsh is not installed (scripts/install-deps.sh installs it)"
fi
done_testing
