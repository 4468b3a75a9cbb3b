#include "hub/hub_api.h"

#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "core/files.h"

namespace deltafin::hub {

using json = nlohmann::json;

namespace {

bool hub_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

bool is_hex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Result<RepoSpec> parse_repo_spec(const std::string& s) {
  RepoSpec r;
  std::string name = s;
  if (const auto at = s.find('@'); at != std::string::npos) {
    name = s.substr(0, at);
    r.revision = s.substr(at + 1);
    if (r.revision.empty()) return error("--repo {}: empty revision after '@'", s);
    for (char c : r.revision)
      if (std::iscntrl(static_cast<unsigned char>(c)) || c == ' ')
        return error("--repo {}: the revision has a space or control character", s);
  }
  const auto slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size() || name.find('/', slash + 1) != std::string::npos)
    return error("--repo {}: expected ORG/NAME or ORG/NAME@REVISION", s);
  for (size_t i = 0; i < name.size(); ++i)
    if (i != slash && !hub_name_char(name[i]))
      return error("--repo {}: '{}' cannot be in a repository name (letters, digits, '-', '_', '.')", s, name[i]);
  if (name.find("..") != std::string::npos) return error("--repo {}: '..' cannot be in a repository name", s);
  r.repo = name;
  return r;
}

Result<std::vector<RemoteFile>> parse_tree_listing(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    return error("the listing is not JSON ({})", e.what());
  }
  if (!j.is_array()) return error("the listing is not a JSON array of entries");
  std::vector<RemoteFile> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    const std::string where = fmt::format("listing entry {}", i);
    if (!e.is_object() || !e.contains("type") || !e["type"].is_string()) return error("{}: no \"type\"", where);
    if (e["type"] != "file") continue;  // directories: their files are listed too (recursive)
    if (!e.contains("path") || !e["path"].is_string()) return error("{}: no \"path\"", where);
    RemoteFile f;
    f.path = e["path"].get<std::string>();
    const std::string w = fmt::format("{} ({})", where, f.path);
    if (f.path.empty() || f.path.front() == '/' || f.path.back() == '/' || f.path.find('\\') != std::string::npos ||
        f.path.find('\0') != std::string::npos)
      return error("{}: not a relative file path", w);
    for (size_t a = 0; a <= f.path.size();) {
      size_t b = f.path.find('/', a);
      if (b == std::string::npos) b = f.path.size();
      const std::string part = f.path.substr(a, b - a);
      if (part.empty() || part == "." || part == "..") return error("{}: a path part is empty, '.' or '..'", w);
      a = b + 1;
    }
    if (!e.contains("size") || !e["size"].is_number_unsigned()) return error("{}: no unsigned \"size\"", w);
    f.size = e["size"].get<uint64_t>();
    if (e.contains("lfs") && !e["lfs"].is_null()) {
      const json& l = e["lfs"];
      if (!l.is_object() || !l.contains("oid") || !l["oid"].is_string()) return error("{}: \"lfs\" has no \"oid\"", w);
      f.sha256 = lower(l["oid"].get<std::string>());
      if (f.sha256.starts_with("sha256:")) f.sha256 = f.sha256.substr(7);
      if (!is_hex(f.sha256, 64)) return error("{}: lfs.oid is not a SHA-256 ({})", w, f.sha256);
      if (l.contains("size") && (!l["size"].is_number_unsigned() || l["size"].get<uint64_t>() != f.size))
        return error("{}: lfs.size differs from size", w);
    } else {
      if (!e.contains("oid") || !e["oid"].is_string()) return error("{}: neither \"lfs\" nor a git \"oid\"", w);
      f.git_oid = lower(e["oid"].get<std::string>());
      if (!is_hex(f.git_oid, 40)) return error("{}: oid is not a git SHA-1 ({})", w, f.git_oid);
    }
    out.push_back(std::move(f));
  }
  return out;
}

HubApi::HubApi(std::string endpoint, RepoSpec spec, std::string token)
    : endpoint_(std::move(endpoint)), spec_(std::move(spec)), token_(std::move(token)), http_(token_) {
  while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
}

void HubApi::set_retry(const RetryPolicy& p, std::function<void(const std::string&)> log) {
  retry_ = p;
  log_ = std::move(log);
  http_.set_stall_timeout(p.stall_timeout_s);
}

Status HubApi::explain(const std::string& url, const HttpReply& r) const {
  const std::string base = describe_http_failure(url, r);
  if (r.status == 401)
    return error("{}: authentication required (or {} does not exist): give --token-file with a token that can read it",
                 base, spec_.repo);
  if (r.status == 403)
    return error("{}: access refused{}", base,
                 r.error_code == "GatedRepo" ? ": the repository is gated; accept its terms with the token's account"
                                             : ": the token cannot read this repository");
  if (r.status == 404 && r.error_code == "RevisionNotFound")
    return error("{}: revision '{}' does not exist in {}", base, spec_.revision, spec_.repo);
  if (r.status == 404 && r.error_code == "RepoNotFound")
    return error("{}: repository {} does not exist at {}", base, spec_.repo, endpoint_);
  if (r.status == 404) return error("{}: not found ({} @ {} at {})", base, spec_.repo, spec_.revision, endpoint_);
  return Status::error(base);
}

Result<std::string> HubApi::resolve_commit() {
  const std::string url = fmt::format("{}/api/models/{}/revision/{}", endpoint_, spec_.repo, url_escape(spec_.revision, false));
  DF_ASSIGN(HttpReply r, get_with_retries(http_, url, {}, 64ull << 20, retry_, log_));
  if (r.status != 200) return explain(url, r);
  try {
    const json j = json::parse(r.body);
    const std::string sha = lower(j.at("sha").get<std::string>());
    if (!is_hex(sha, 40)) return error("GET {}: \"sha\" is not a commit id ({})", url, sha);
    return sha;
  } catch (const std::exception& e) {
    return error("GET {}: no commit \"sha\" in the reply ({})", url, e.what());
  }
}

Result<std::vector<RemoteFile>> HubApi::list_files(const std::string& commit) {
  std::string url = fmt::format("{}/api/models/{}/tree/{}?recursive=true", endpoint_, spec_.repo, commit);
  std::vector<RemoteFile> all;
  std::set<std::string> seen, pages;
  while (!url.empty()) {
    if (!pages.insert(url).second) return error("GET {}: the listing's next page points back to a page already read", url);
    if (pages.size() > 100000) return error("GET {}: more than 100000 listing pages", url);
    DF_ASSIGN(HttpReply r, get_with_retries(http_, url, {}, 256ull << 20, retry_, log_));
    if (r.status != 200) return explain(url, r);
    auto page = parse_tree_listing(r.body);
    if (!page.ok()) return page.status().with_context("GET " + url);
    for (auto& f : *page) {
      if (!seen.insert(f.path).second) return error("GET {}: {} is listed twice", url, f.path);
      all.push_back(std::move(f));
    }
    url = r.link_next;
    if (!url.empty() && url.front() == '/') url = endpoint_ + url;
  }
  return all;
}

Result<std::string> read_token_file(const std::string& path) {
  if (path.empty()) return std::string();
  DF_ASSIGN(std::string t, read_file(path));
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.erase(t.begin());
  if (t.empty()) return error("--token-file {}: is empty", path);
  for (char c : t)
    if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c)))
      return error("--token-file {}: the token has a space or control character inside", path);
  return t;
}

std::string HubApi::file_url(const std::string& commit, const std::string& path) const {
  return fmt::format("{}/{}/resolve/{}/{}", endpoint_, spec_.repo, commit, url_escape(path, true));
}

}  // namespace deltafin::hub
