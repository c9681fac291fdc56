// Public: a handler that serves files below a directory, the same on h1, h2 and h3 — with
// validators, conditional requests and single byte ranges (RFC 9110 §8.8, §13, §14).
#ifndef PETREL_HTTP_STATIC_FILES_H_
#define PETREL_HTTP_STATIC_FILES_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "petrel/http/router.h"

namespace petrel {

struct StaticFilesOptions {
  // Served for a request that names a directory with a trailing '/'. Empty: none.
  std::string index_file = "index.html";
  // Extension (without the dot, case-insensitive) -> Content-Type, consulted before the
  // built-in table (which knows html, css, js, json, txt, svg, png, jpeg, wasm, woff2, ...).
  absl::flat_hash_map<std::string, std::string> mime_types;
  // Content-Type for extensions no table knows.
  std::string default_mime_type = "application/octet-stream";
  // A directory without an index file gets an HTML listing instead of 404. Entries that
  // resolve outside the root (symlinks) are left out.
  bool list_directories = false;
  // Sent as Cache-Control on 200, 206 and 304 answers when non-empty (e.g. "max-age=3600").
  std::string cache_control;
  // Serve a file compressed ahead of time, "name.br" or "name.gz" beside "name", to a request
  // that accepts br or gzip (Accept-Encoding, brotli first on a tie), with Content-Encoding and
  // the Content-Type of "name" (see StaticFiles below). Every file response then carries
  // Vary: Accept-Encoding.
  bool precompressed = false;

  // ---- Open-file cache (see StaticFiles below) ----
  // Regular files remembered per loop thread, least recently used first out. 0 disables the
  // cache: every request opens, stats and closes its file. Open descriptors are further bounded
  // to a quarter of RLIMIT_NOFILE per thread, so the cache alone cannot starve accept().
  size_t file_cache_entries = 1024;
  // Files up to this size are kept in memory (0: none); larger ones keep an open descriptor.
  uint64_t file_cache_memory_file_size = 16 * 1024;
  // Bytes of file content kept in memory per loop thread; beyond it, least recently used
  // entries go.
  uint64_t file_cache_memory_bytes = 4 * 1024 * 1024;
  // How long a cached file is served without looking at its path again: a file replaced,
  // changed, truncated, removed or made unreadable is noticed within this time. Zero looks on
  // every request (the lookup is then as costly as without a cache, the formatting still saved).
  absl::Duration file_cache_revalidate = absl::Seconds(1);
};

// A handler serving the files below `root` (resolved with realpath once, here).
//
// Which file: the route's wildcard (req.Param("*")) when the route has one — "/files/*" serves
// "/files/a/b.txt" from root/a/b.txt, "/*" serves the whole path — otherwise the request path.
// The name is percent-decoded once per segment; an encoded '/', an empty, "." or ".." segment,
// and any name that resolves (symlinks included) outside the root get 404, so nothing outside is
// revealed; malformed escapes and NUL get 400.
//
// Answers: GET and HEAD only (else 405, Allow: GET, HEAD). A directory named without a trailing
// '/' gets 301 to the path plus '/'; with it, the index file (or a listing, or 404). Missing or
// non-regular files: 404; unreadable ones: 403. Files carry Content-Type, a strong ETag (a
// 64-bit digest of size, mtime in nanoseconds, inode and device, in 11 base64url digits),
// Last-Modified (a future mtime is sent as now) and Accept-Ranges: bytes (field names in
// lowercase, as h2 and h3 send them); If-Match, If-Unmodified-Since (412), If-None-Match and
// If-Modified-Since (304) are evaluated in RFC 9110 §13.2.2 order. A GET with one satisfiable byte
// range (after merging) gets 206 with Content-Range, none satisfiable 416 with "bytes */size";
// several disjoint ranges, a malformed Range or a failed If-Range get the whole file (200). The
// body is a FileBody, so cleartext h1 can sendfile it.
//
// Files are opened below an O_PATH descriptor of the root with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS) after the realpath check, so a symlink swapped in between cannot lead
// outside; kernels without openat2 fall back to open(O_NOFOLLOW), which guards only the last
// component against that race. File system calls are blocking and run on the request's loop thread:
// serve from local disks. If `root` cannot be resolved, every request gets 404 (and a warning is
// logged once).
//
// Precompressed files (options.precompressed): when "name" resolves to a regular file and the
// request accepts br (or gzip), "name.br" (or "name.gz") is looked up with the same rules; if it
// is a regular file too, it is the representation served — its own ETag (from its own metadata,
// so each encoding's differs), Last-Modified, length and byte ranges (ranges apply to the
// encoded bytes, RFC 9110 §14.1.2), with Content-Encoding and the Content-Type of "name". A
// sibling without its original is never served; "name.br" requested by that name is an
// ordinary file. Lookups of siblings are cached like files, missing ones included, so a
// request for a file without siblings costs no system call either.
//
// Open-file cache: each loop thread keeps, per handler, the regular files it served — the open
// descriptor (or the bytes of a small file), size, mtime, inode, and the ETag, Last-Modified and
// Content-Type already formatted — keyed by the decoded name (for "dir/", the index file).
// Within `file_cache_revalidate` of its last check an entry is served without a system call
// (small files from memory, others by sendfile/pread on the cached descriptor); after that, or
// after a read found the file shorter, the name is looked up again with exactly the checks above
// and the entry kept only if device, inode, size, mtime and ctime are unchanged. So a replaced,
// changed or removed file is served as its previous version for at most that time, each response
// all from one version: a file renamed over it is new content, and a file truncated under an
// open descriptor makes a response cut short fail (connection closed or stream reset) rather
// than send bytes it no longer has. Directories, redirects, listings and errors are not cached.
// A small file's bytes are shared with the responses that send them (SharedBytes: no copy per
// response); like a descriptor still streaming when its entry goes, they stay until the last
// such response ends. The cache of a thread is dropped when its handler is destroyed (at once on
// the destroying thread, on another at its next static-file request) or when the thread ends.
// On EMFILE/ENFILE the least recently used descriptors are closed and the open is retried. Safe
// to run on several loop threads at once: each thread uses only its own cache, without locks.
Handler StaticFiles(std::string root, StaticFilesOptions options = {});

}  // namespace petrel

#endif  // PETREL_HTTP_STATIC_FILES_H_
