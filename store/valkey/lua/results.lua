-- results (read): a page of one site's done jobs, in first-enqueue
-- order (see site_page for arguments and reply).
return site_page(K.finished)
