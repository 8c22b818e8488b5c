package mcpserver

// DisableFastPath sends every request of s through mcp-go.
func DisableFastPath(s *Server) { s.noFast = true }

// FastServed is how many calls s's fast path answered.
func FastServed(s *Server) int64 { return s.fastServed.Load() }
