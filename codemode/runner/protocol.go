package runner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// Message types.
const (
	msgRun    = "run"    // host → child: the code to run
	msgResult = "result" // host → child: a tool call's value
	msgError  = "error"  // host → child: a tool call's failure
	msgReady  = "ready"  // child → host: imports done, waiting for run
	msgCall   = "call"   // child → host: a tool call
	msgOutput = "output" // child → host: text written to stdout
	msgDone   = "done"   // child → host: the code finished
	msgFailed = "failed" // child → host: the code raised
)

// message is any child → host message; fields a type does not use are zero.
type message struct {
	Type      string          `json:"type"`
	ID        int64           `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Data      string          `json:"data"`
	Error     string          `json:"error"`
	Traceback string          `json:"traceback"`
}

// parseMessage decodes one line from the child's protocol stream. A line
// that is not a JSON object with a type is text, like Bub's host treats
// non-JSON stdout lines; its newline is restored.
func parseMessage(line []byte) message {
	line = bytes.TrimSuffix(line, []byte("\n"))
	var m message
	if err := json.Unmarshal(line, &m); err != nil || m.Type == "" {
		return message{Type: msgOutput, Data: string(line) + "\n"}
	}
	return m
}

// MaxLine bounds one protocol line from the child. The child's own lines
// are far smaller (output goes in 8 KiB chunks; a call's arguments are
// bounded by what a client may send); a longer one can only come from code
// writing to the protocol descriptor itself, and it must not grow the
// host's memory without end.
const MaxLine = 32 << 20

// errLineTooLong is next's error for a line over MaxLine.
var errLineTooLong = errors.New("runner: protocol line over 32 MiB")

// lineReader reads newline-terminated lines of up to max bytes.
type lineReader struct {
	br  *bufio.Reader
	buf []byte
	max int
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: MaxLine}
}

// next returns the next line including its newline; the slice is valid
// until the following call. At the end of the input it returns the
// unterminated rest (possibly empty) with the reader's error; a line over
// max bytes ends the input with errLineTooLong.
func (lr *lineReader) next() ([]byte, error) {
	line, err := lr.br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	lr.buf = append(lr.buf[:0], line...)
	for {
		line, err = lr.br.ReadSlice('\n')
		lr.buf = append(lr.buf, line...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return lr.buf, err
		}
		if len(lr.buf) > lr.max {
			lr.buf = nil
			return nil, errLineTooLong
		}
	}
}

type runMessage struct {
	Type     string   `json:"type"`
	Code     string   `json:"code"`
	Filename string   `json:"filename"`
	Tools    []string `json:"tools"`
}

type errorMessage struct {
	Type    string `json:"type"`
	ID      int64  `json:"id"`
	Message string `json:"message"`
}

// encodeRun returns the run message line.
func encodeRun(code, filename string, tools []string) []byte {
	if tools == nil {
		tools = []string{}
	}
	b, err := json.Marshal(runMessage{Type: msgRun, Code: code, Filename: filename, Tools: tools})
	if err != nil {
		panic(err) // strings always marshal
	}
	return append(b, '\n')
}

// encodeError returns an error reply line.
func encodeError(id int64, msg string) []byte {
	b, err := json.Marshal(errorMessage{Type: msgError, ID: id, Message: msg})
	if err != nil {
		panic(err) // strings always marshal
	}
	return append(b, '\n')
}

// encodeResult returns a result reply line, with value compacted onto it;
// empty means null. It fails if value is not valid JSON.
func encodeResult(id int64, value json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(value) + 48)
	buf.WriteString(`{"type":"result","id":`)
	buf.Write(strconv.AppendInt(nil, id, 10))
	buf.WriteString(`,"value":`)
	if len(bytes.TrimSpace(value)) == 0 {
		buf.WriteString("null")
	} else if err := json.Compact(&buf, value); err != nil {
		return nil, err
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}
