package storetest

// The protocol "2" case lists of the groups still to be written; each
// moves to its group's file as its cases land.

func payloadContract2(suite)        {}
func cancelContract2(suite)         {}
func cancelRequestsContract2(suite) {}
func pendingContract2(suite)        {}
func resultsContract2(suite)        {}
func sweepContract2(suite)          {}
func presenceContract2(suite)       {}
