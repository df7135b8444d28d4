/*
 * s3/json.h - a string value of a flat JSON object.
 *
 * IMDS answers {"Code":"Success","AccessKeyId":"...",...}.  The reader
 * is a tokenizer, so a name inside a value cannot match; it reads what
 * comes until the first '}' (or the end of the string) and never past
 * the string's NUL, whatever the bytes.
 */
#ifndef MAPFS_S3_JSON_H
#define MAPFS_S3_JSON_H

/*
 * The value of name in the object that js (NUL-terminated) holds,
 * unescaped (\n, \t, \", \\; a \u escape makes it NULL), malloc'd:
 * the caller frees it (and wipes it if it is a secret).  NULL when the
 * name is not there, the text is not such an object, or no memory.
 * Copies of values it passes over are wiped before they are freed.
 */
char *s3_json_get(const char *js, const char *name);

#endif
