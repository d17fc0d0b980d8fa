/* main.c - placeholder, replaced by the CLI dispatcher. */
#include <stdio.h>
int main(void) { puts("pbx " PBX_VERSION); return 0; }
