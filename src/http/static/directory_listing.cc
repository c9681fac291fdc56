#include "http/static/directory_listing.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace petrel::http_internal {
namespace {

bool IsUnreserved(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

std::string PercentEncode(absl::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (IsUnreserved(c)) {
      out.push_back(c);
    } else {
      const auto u = static_cast<unsigned char>(c);
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    }
  }
  return out;
}

}  // namespace

std::string HtmlEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out.append("&amp;");
        break;
      case '<':
        out.append("&lt;");
        break;
      case '>':
        out.append("&gt;");
        break;
      case '"':
        out.append("&quot;");
        break;
      case '\'':
        out.append("&#39;");
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string RenderDirectoryListing(absl::string_view request_path,
                                   std::vector<ListingEntry> entries, bool is_root) {
  std::sort(entries.begin(), entries.end(),
            [](const ListingEntry& a, const ListingEntry& b) { return a.name < b.name; });
  const std::string title = HtmlEscape(request_path);
  std::string page =
      absl::StrCat("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ", title,
                   "</title></head>\n<body><h1>Index of ", title, "</h1>\n<ul>\n");
  if (!is_root) page.append("<li><a href=\"../\">../</a></li>\n");
  for (const ListingEntry& e : entries) {
    // "./" keeps a name such as "a:b" from reading as a scheme in the relative reference.
    const char* slash = e.directory ? "/" : "";
    absl::StrAppend(&page, "<li><a href=\"./", PercentEncode(e.name), slash, "\">",
                    HtmlEscape(e.name), slash, "</a>");
    if (!e.directory) absl::StrAppend(&page, " (", e.size, " bytes)");
    page.append("</li>\n");
  }
  page.append("</ul></body></html>\n");
  return page;
}

}  // namespace petrel::http_internal
