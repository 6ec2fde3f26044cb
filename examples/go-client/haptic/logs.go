// The gate's log lines (serve --log-format json on its stderr) as records
// for the controller's Logger: level, message and fields, never as text.

package haptic

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"sync"
)

// maxLine bounds one buffered log line; a longer one is cut and delivered.
const maxLine = 1 << 20

type logLines struct {
	log     Logger
	mu      sync.Mutex
	partial []byte
}

func newLogLines(log Logger) *logLines { return &logLines{log: log} }

// Write takes serve's stderr as it comes and delivers each whole line.
func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		at := bytes.IndexByte(l.partial, '\n')
		if at < 0 {
			if len(l.partial) > maxLine {
				l.deliver(l.partial)
				l.partial = nil
			}
			return len(p), nil
		}
		l.deliver(l.partial[:at])
		l.partial = l.partial[at+1:]
	}
}

// flush delivers a last line without its newline.
func (l *logLines) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.deliver(l.partial)
		l.partial = nil
	}
}

// deliver parses one line: a JSON record becomes its level, message and
// fields (sorted by name); anything else is delivered as an info record
// carrying the raw line.
func (l *logLines) deliver(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	var record map[string]any
	if err := json.Unmarshal(line, &record); err != nil {
		l.log.Info("rendergate: a log line that is not JSON", "line", string(line))
		return
	}
	level, _ := record["level"].(string)
	message, _ := record["message"].(string)
	fields := record
	if nested, ok := record["fields"].(map[string]any); ok {
		fields = nested
		if m, ok := nested["message"].(string); ok && message == "" {
			message = m
		}
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		switch k {
		case "level", "message", "timestamp", "fields":
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k, fields[k])
	}
	switch strings.ToUpper(level) {
	case "ERROR":
		l.log.Error(message, args...)
	case "WARN":
		l.log.Warn(message, args...)
	case "DEBUG", "TRACE":
		l.log.Debug(message, args...)
	default:
		l.log.Info(message, args...)
	}
}
