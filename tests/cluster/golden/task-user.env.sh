export PBX_TASK_USER=pbx-task
