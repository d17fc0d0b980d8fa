/*
 * quote.c - POSIX shell quoting (see quote.h).
 */
#include "util/quote.h"

#include <string.h>

void pbx_shell_quote(struct pbx_buf *out, const char *word)
{
	const char *p;
	pbx_buf_addc(out, '\'');
	for (p = word; *p; p++) {
		if (*p == '\'')
			pbx_buf_adds(out, "'\\''");
		else
			pbx_buf_addc(out, *p);
	}
	pbx_buf_addc(out, '\'');
}

void pbx_shell_join(struct pbx_buf *out, const char *const *argv)
{
	size_t i;
	for (i = 0; argv[i]; i++) {
		if (i)
			pbx_buf_addc(out, ' ');
		pbx_shell_quote(out, argv[i]);
	}
}

char *pbx_shell_quoted(const char *word)
{
	struct pbx_buf b = PBX_BUF_INIT;
	pbx_shell_quote(&b, word);
	return pbx_buf_detach(&b, NULL);
}
