'use strict';
// tests/s3/s3rver-fixes.js - preloaded by s3rver.sh (node -r) into s3rver
// 3.7.1 to fix two races of its filesystem store that real S3 does not have:
//
// - A DELETE removes its key's directory once empty, and a PUT into that
//   directory at the same moment (mkdirp, then open) found it gone: the
//   write stream's 'error' had no listener and the whole server died
//   ("Unhandled 'error' event", ENOENT), taking every later test request
//   with it (seen as an e2e suite timing out against a store that was
//   gone).  Now the PUT makes the directory and opens the file again until
//   the file exists (then the directory is not empty and stays), and a
//   write error answers that request with an error instead.
// - PUT and UploadPart answered before the bytes were in the file (they
//   waited for the hashing stream, not the file), so a GET right after a
//   200 could read a short object.  Now they wait for the file.
//
// A DELETE's clean-up of empty directories also stops quietly where a
// concurrent request already removed a directory or put a key in it.
const crypto = require('crypto');
const path = require('path');
const { Transform } = require('stream');

const lib = path.resolve(path.dirname(process.argv[1]), '..', 'lib');
const fs = require(require.resolve('fs-extra', { paths: [lib] }));
const Store = require(path.join(lib, 'stores', 'filesystem.js'));

// Open file for writing, making its directory (again) while a concurrent
// clean-up removes it; resolves to the fd.
async function openInDir(file) {
	for (let i = 0; ; i++) {
		try {
			await fs.mkdirp(path.dirname(file));
			return await fs.open(file, 'w');
		} catch (err) {
			if ((err.code !== 'ENOENT' && err.code !== 'EEXIST') ||
			    i >= 50)
				throw err;
		}
	}
}

// Stream content (a Buffer or a readable) into fd; resolves to
// [size, md5 hex] once the file holds every byte and is closed.
function writeAll(fd, content, encoding) {
	return new Promise((resolve, reject) => {
		const out = fs.createWriteStream(null, { fd });
		const md5 = crypto.createHash('md5');
		let size = 0;

		out.on('error', reject);
		out.on('close', () => resolve([size, md5.digest('hex')]));
		if (Buffer.isBuffer(content)) {
			md5.update(content);
			size = content.length;
			out.end(content);
			return;
		}
		content.on('error', err => {
			out.destroy();
			reject(err);
		});
		content
			.pipe(new Transform({
				transform(chunk, enc, callback) {
					md5.update(chunk, encoding || enc);
					size += chunk.length;
					callback(null, chunk);
				},
			}))
			.on('error', reject)
			.pipe(out);
	});
}

Store.prototype.putObject = async function putObject(object) {
	const file = this.getResourcePath(object.bucket, object.key, 'object');
	const [size, md5] = await writeAll(await openInDir(file),
					   object.content);

	await this.putMetadata(object.bucket, object.key, object.metadata,
			       md5);
	return { size, md5 };
};

Store.prototype.putPart = async function putPart(bucket, uploadId,
						  partNumber, content) {
	const file = path.join(this.getResourcePath(bucket, undefined,
						    'uploads'),
			       uploadId, partNumber.toString());
	const [size, md5] = await writeAll(await openInDir(file), content,
					   'binary');

	await fs.writeFile(`${file}.md5`, md5);
	return { size, md5 };
};

const deleteObject = Store.prototype.deleteObject;
Store.prototype.deleteObject = async function (bucket, key) {
	try {
		await deleteObject.call(this, bucket, key);
	} catch (err) {
		// The object is gone; only the empty-directory clean-up met a
		// concurrent request.
		if (err.code !== 'ENOENT' && err.code !== 'ENOTEMPTY')
			throw err;
	}
};
