package ctl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// produceBatch bounds the records of one HTTP request.
const (
	produceBatchRecords = 1000
	produceBatchBytes   = 1 << 20
	maxLineBytes        = 8 << 20
)

type httpRecord struct {
	Key       *string `json:"key,omitempty"`
	KeyB64    *string `json:"key_b64,omitempty"`
	Value     *string `json:"value,omitempty"`
	ValueB64  *string `json:"value_b64,omitempty"`
	Partition *int32  `json:"partition,omitempty"`
}

type produceResult struct {
	Offsets []struct {
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		ErrorCode int16  `json:"error_code"`
		Error     string `json:"error"`
	} `json:"offsets"`
}

func produce(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	sep := fs.String("key-separator", "", "split each line into key and value at the first occurrence of this string")
	acks := fs.String("acks", "all", "acks: all, leader or none")
	partition := fs.Int("partition", -1, "send every record to this partition (default: by key, or sticky for keyless records)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "a topic name"); err != nil {
		return err
	}
	switch *acks {
	case "all", "leader", "none":
	default:
		return fmt.Errorf("%w: --acks %q is not all, leader or none", errUsage, *acks)
	}
	frontends := addrs(env.Frontend)
	if len(frontends) == 0 {
		return fmt.Errorf("%w: no frontend address", errUsage)
	}
	endpoint := strings.TrimRight(frontends[0], "/") + "/v1/topics/" + url.PathEscape(pos[0]) + "/records?acks=" + *acks
	sc := bufio.NewScanner(env.Stdin)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	var batch []httpRecord
	size, sent, failed := 0, 0, 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := postRecords(ctx, endpoint, batch, env)
		sent += len(batch)
		failed += n
		batch, size = batch[:0], 0
		return err
	}
	for sc.Scan() {
		line := sc.Text()
		rec := httpRecord{}
		if *sep != "" {
			if k, v, ok := strings.Cut(line, *sep); ok {
				rec.Key, rec.KeyB64 = textOrB64(k)
				line = v
			}
		}
		rec.Value, rec.ValueB64 = textOrB64(line)
		if *partition >= 0 {
			p := int32(*partition)
			rec.Partition = &p
		}
		// Base64 grows a binary line by a third; JSON escaping may double a
		// text one. Flush first when this record would take the request over.
		recSize := 2*len(sc.Text()) + 64
		if len(batch) > 0 && (len(batch) >= produceBatchRecords || size+recSize > produceBatchBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, rec)
		size += recSize
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	if err := flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d records failed", failed, sent)
	}
	return nil
}

func textOrB64(s string) (*string, *string) {
	if utf8.ValidString(s) {
		return &s, nil
	}
	b := base64.StdEncoding.EncodeToString([]byte(s))
	return nil, &b
}

// postRecords sends one request and returns how many records failed; it reports
// the first failures on stderr.
func postRecords(ctx context.Context, endpoint string, recs []httpRecord, env Env) (int, error) {
	body, err := json.Marshal(map[string][]httpRecord{"records": recs})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("produce: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, fmt.Errorf("produce: reading response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("produce: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(data))
	}
	var res produceResult
	if err := json.Unmarshal(data, &res); err != nil {
		return 0, fmt.Errorf("produce: bad response: %w", err)
	}
	if len(res.Offsets) != len(recs) {
		return 0, fmt.Errorf("produce: %d results for %d records", len(res.Offsets), len(recs))
	}
	failed := 0
	for i, o := range res.Offsets {
		if o.ErrorCode != 0 || o.Error != "" {
			if failed < 5 {
				fmt.Fprintf(env.Stderr, "record %d: error %d: %s\n", i, o.ErrorCode, o.Error)
			}
			failed++
		}
	}
	return failed, nil
}
