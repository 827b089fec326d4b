-- now: read the store clock.
-- Reply: milliseconds since the epoch.
return clock_now()
