/*
 * num.c - number parsing and formatting for reports (see num.h).
 */
#include "results/num.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *skip_digits(const char *p, int *count)
{
	*count = 0;
	while (isdigit((unsigned char)*p)) {
		p++;
		(*count)++;
	}
	return p;
}

int pbx_num_parse(const char *s, double *v)
{
	const char *p = s;
	int nint, nfrac = 0, nexp;
	if (!s)
		return 0;
	if (*p == '-')
		p++;
	p = skip_digits(p, &nint);
	if (*p == '.')
		p = skip_digits(p + 1, &nfrac);
	if (nint + nfrac == 0)
		return 0;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		p = skip_digits(p, &nexp);
		if (!nexp)
			return 0;
	}
	if (*p)
		return 0;
	*v = strtod(s, NULL);
	return isfinite(*v);
}

void pbx_num_exact(double v, char *buf, size_t size)
{
	int prec;
	for (prec = 15; prec < 17; prec++) {
		snprintf(buf, size, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
	snprintf(buf, size, "%.17g", v);
}

void pbx_num_short(double v, char *buf, size_t size)
{
	snprintf(buf, size, "%.6g", v == 0 ? 0.0 : v);
}
