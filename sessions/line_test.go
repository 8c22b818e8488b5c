package sessions

// appendLine appends one complete tape line, newline included, as the tape
// writes them (tests build tape files with it).
func appendLine(dst []byte, id int, kind string, payload, meta []byte, date string) []byte {
	dst = appendLineHead(dst, id, kind, payload, meta)
	dst = appendJSONString(dst[:len(dst)-1], date) // the head ends with the date's opening quote
	return append(dst, "}\n"...)
}
