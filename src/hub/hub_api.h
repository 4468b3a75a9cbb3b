// The Hugging Face Hub's public HTTP interface, as far as `setup` needs it; a
// mirror that serves the same paths works the same way:
//   GET {endpoint}/api/models/{repo}/revision/{revision}      -> {"sha": commit, ...}
//   GET {endpoint}/api/models/{repo}/tree/{commit}?recursive=true
//       -> [{"type": "file", "path", "size", "oid", "lfs": {"oid": sha256, "size"}}, ...]
//       (more pages behind the Link header's rel="next")
//   GET {endpoint}/{repo}/resolve/{commit}/{path}            -> the bytes (Range; redirects)
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "hub/http.h"
#include "hub/retry.h"

namespace deltafin::hub {

struct RepoSpec {
  std::string repo;                // ORG/NAME
  std::string revision = "main";   // branch, tag or commit
};
// "ORG/NAME" or "ORG/NAME@REVISION"; refuses names the Hub would not have.
Result<RepoSpec> parse_repo_spec(const std::string& s);

struct RemoteFile {
  std::string path;
  uint64_t size = 0;
  std::string sha256;   // the LFS object id (large files): SHA-256 of the content
  std::string git_oid;  // the git blob id (small files): SHA-1 of "blob SIZE\0" + content
};

// One page of a tree listing: its files (directories skipped; every path
// checked: relative, no "..", no empty part). Errors name the entry.
Result<std::vector<RemoteFile>> parse_tree_listing(const std::string& json_text);

// The access token in `path` (trimmed; "" for an empty path); errors name the file.
Result<std::string> read_token_file(const std::string& path);

class HubApi {
 public:
  HubApi(std::string endpoint, RepoSpec spec, std::string token);
  // The policy of the API's requests (retries logged through `log`); default: RetryPolicy{}, no log.
  void set_retry(const RetryPolicy& p, std::function<void(const std::string&)> log);
  // The commit the revision names now (pinned for the rest of the install).
  Result<std::string> resolve_commit();
  // Every file of the repository at `commit`, following pages.
  Result<std::vector<RemoteFile>> list_files(const std::string& commit);
  std::string file_url(const std::string& commit, const std::string& path) const;
  const std::string& endpoint() const { return endpoint_; }

 private:
  // A failed reply in words a user can act on (authentication, gated, missing revision).
  Status explain(const std::string& url, const HttpReply& r) const;
  std::string endpoint_;
  RepoSpec spec_;
  std::string token_;
  HttpClient http_;
  RetryPolicy retry_;
  std::function<void(const std::string&)> log_;
};

}  // namespace deltafin::hub
