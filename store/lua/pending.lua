-- pending (read): a page of one site's jobs awaiting a payload, in
-- first-enqueue order (see site_page for arguments and reply).
return site_page(K.awaiting, A.site, A.after, A.page, A.cap)
