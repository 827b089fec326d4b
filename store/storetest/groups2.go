package storetest

// The protocol "2" case lists of the groups still to be written; each
// moves to its group's file as its cases land.

func sweepContract2(suite)    {}
func presenceContract2(suite) {}
