/*
 * complete.h - shell completion's candidates (complete.c), for the hidden
 * verb `pbx __complete WORD...` that completion/pbx.bash and
 * completion/_pbx call.
 */
#ifndef PBX_CLI_COMPLETE_H
#define PBX_CLI_COMPLETE_H

/* Prints, one a line, what argv[argc - 1] (the word being completed, "" for
 * a new one) can be after the words argv[0..argc-1) of a pbx command line
 * (without "pbx"); "__files__" when it is a file name.  Reads the store and
 * the configuration at config_path; never fails, writes nothing else. */
void pbx_complete(const char *config_path, int argc, char **argv);

#endif
