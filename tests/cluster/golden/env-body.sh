# pbx node environment: sourced by pbx before every remote command
export PATH='/tmp/pbx-x/clusters/c1/nodes/node1/usr/local/bin':"$PATH"
export OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export PBX_ENV_DIR='/tmp/pbx-x/clusters/c1/nodes/node1/var/tmp'
export SLURM_CONF='/tmp/pbx-x/clusters/c1/nodes/node1/etc/slurm/slurm.conf'
export PBX_SHARED='/tmp/pbx-x/clusters/c1/shared'
export PBX_ROOT='/tmp/pbx-x/clusters/c1/nodes/node1'
export PBX_NODE='node1'
export PBX_CLUSTER='c1'
