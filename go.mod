module github.com/byollm/relayd

go 1.26.8
