"""The web: pages as an agent reads them, where pages come from (an offline site's files, a
loopback server, the live web) and how the web is searched (an index over a site, search APIs).

Heavier pieces import from their modules: `searchgym.retrievers.web.fetch.HttpSource` (live
pages behind an address guard), `.serve.SiteServer`, `.site.FileSource` and `.site.SiteSearch`,
`.search_api.SerpAPISearch`, `.search_api.BraveSearch` and `.search_api.SearxNG`.
"""

from searchgym.retrievers.web.page import (
    FetchError,
    Link,
    Page,
    PageSource,
    RawPage,
    SearchResult,
    WebSearcher,
)

__all__ = ["FetchError", "Link", "Page", "PageSource", "RawPage", "SearchResult", "WebSearcher"]
