-- resultsVersion (read): what a cached results listing of a site is
-- checked by, so an unchanged poll costs this call alone.
-- A: site.
-- Reply: {version ('' before the first change), count of listed jobs}.
return results_version(A.site)
