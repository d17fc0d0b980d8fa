# pbx node environment: sourced by pbx before every remote command
export OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export PBX_ENV_DIR='/r/it'\''s $(echo pwned) `id`/var/tmp'
export SLURM_CONF='/r/it'\''s $(echo pwned) `id`/etc/slurm/slurm.conf'
export PBX_SHARED='/s "$HOME" '\'''\'''
export PBX_ROOT='/r/it'\''s $(echo pwned) `id`'
export PBX_NODE='n'\''1
export PBX_OWNED=1'
export PBX_CLUSTER='c$(x)'
