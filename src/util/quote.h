/*
 * quote.h - building command lines for a remote POSIX shell from argv.
 *
 * Every word is wrapped in single quotes, with embedded single quotes
 * written as '\'' so that no byte (quotes, $(), backticks, ;, newlines,
 * non-ASCII) is ever interpreted by the remote shell.
 */
#ifndef PBX_UTIL_QUOTE_H
#define PBX_UTIL_QUOTE_H

#include "util/buf.h"

/* Appends `word` shell-quoted to `out`. */
void pbx_shell_quote(struct pbx_buf *out, const char *word);
/* Appends argv[0..] (NULL-terminated), quoted and separated by spaces. */
void pbx_shell_join(struct pbx_buf *out, const char *const *argv);
/* Returns a fresh quoted copy of `word`; caller frees. */
char *pbx_shell_quoted(const char *word);

#endif
