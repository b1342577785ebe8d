module odradek.dev/e2e/pause

go 1.22
