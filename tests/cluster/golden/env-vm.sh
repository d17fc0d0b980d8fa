# pbx node environment: sourced by pbx before every remote command
export SLURM_CONF='/etc/slurm/slurm.conf'
export PBX_SHARED='/shared'
export PBX_ROOT=''
export PBX_NODE='head'
export PBX_CLUSTER='c1'
