/*
 * num.h - numbers as text for reports: a strict decimal parser (so "0x10",
 * "inf" or " 1" are not numbers), the shortest text that reads back to the
 * same double (CSV), and a short display form (tables).
 */
#ifndef PBX_RESULTS_NUM_H
#define PBX_RESULTS_NUM_H

#include <stddef.h>
#include <stdint.h>

/* 1 and *v when all of s is -?(D+(.D*)?|.D+)([eE][+-]?D+)? and finite. */
int pbx_num_parse(const char *s, double *v);
/* The shortest of %.15g/%.16g/%.17g that round-trips. */
void pbx_num_exact(double v, char *buf, size_t size);
/* %.6g: what tables and Markdown show. */
void pbx_num_short(double v, char *buf, size_t size);

#endif
