package plot

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDrawsAReadablePNG(t *testing.T) {
	c := Chart{Title: "claim latency", XLabel: "queued jobs", YLabel: "µs", LogX: true, Series: []Series{
		{Name: "valkey", Points: []Point{{1e3, 247}, {1e4, 262}, {1e5, 238}, {1e6, 232}}},
		{Name: "memory", Points: []Point{{1e3, 3.6}, {1e6, 3.2}}},
	}}
	b, err := c.PNG()
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, width, img.Bounds().Dx())
	// The first series' colour is drawn somewhere on the chart.
	want := palette[0]
	found := false
	for y := 0; y < height && !found; y++ {
		for x := 0; x < width; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == want.R && uint8(g>>8) == want.G && uint8(bl>>8) == want.B {
				found = true
				break
			}
		}
	}
	require.True(t, found)
}

func TestRefusesAnEmptyChart(t *testing.T) {
	_, err := Chart{Title: "empty"}.PNG()
	require.Error(t, err)
}

func TestLineReachesItsEnd(t *testing.T) {
	for _, end := range [][2]int{{10, 3}, {3, 10}, {-5, 7}, {0, -9}, {8, 8}} {
		img := newBlank()
		line(img, 20, 20, 20+end[0], 20+end[1], palette[0])
		require.Equal(t, palette[0], img.RGBAAt(20+end[0], 20+end[1]), "line to %v", end)
	}
}

func newBlank() *image.RGBA { return image.NewRGBA(image.Rect(0, 0, 64, 64)) }

func TestShortTicks(t *testing.T) {
	for v, want := range map[float64]string{1e3: "1k", 1e4: "10k", 2.5e5: "250k", 1e6: "1M", 42: "42", 0.5: "0.5"} {
		require.Equal(t, want, short(v))
	}
}
