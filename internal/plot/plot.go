// Package plot draws small line charts as PNG with the standard library
// and a built-in bitmap font, so benchmark tools can write their figures
// without a plotting dependency.
package plot

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Point is one measurement.
type Point struct{ X, Y float64 }

// Series is one line.
type Series struct {
	Name   string
	Points []Point
}

// Chart describes a chart. X is drawn on a log10 scale when LogX is set,
// which suits store depths from a thousand to a million.
type Chart struct {
	Title, XLabel, YLabel string
	LogX                  bool
	Series                []Series
}

const (
	width, height = 800, 480
	left, right   = 80, 30
	top, bottom   = 50, 70
)

var palette = []color.RGBA{{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xff, 0x7f, 0x0e, 0xff}}

// PNG renders the chart.
func (c Chart) PNG() ([]byte, error) {
	xs, ys := c.bounds()
	if xs[0] == xs[1] || len(c.Series) == 0 {
		return nil, fmt.Errorf("plot %q: nothing to draw", c.Title)
	}
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	grey := color.RGBA{0xcc, 0xcc, 0xcc, 0xff}
	black := color.RGBA{0, 0, 0, 0xff}

	scale := func(x float64) float64 { return x }
	if c.LogX {
		scale = math.Log10
	}
	x0, x1 := scale(xs[0]), scale(xs[1])
	px := func(x float64) int { return left + int((scale(x)-x0)/(x1-x0)*float64(width-left-right)) }
	py := func(y float64) int { return height - bottom - int((y-ys[0])/(ys[1]-ys[0])*float64(height-top-bottom)) }

	// Axes, grid and tick labels.
	for i := 0; i <= 5; i++ {
		y := ys[0] + (ys[1]-ys[0])*float64(i)/5
		line(img, left, py(y), width-right, py(y), grey)
		text(img, 8, py(y)+4, strconv.FormatFloat(y, 'g', 3, 64), black)
	}
	for _, x := range c.xTicks(xs) {
		line(img, px(x), top, px(x), height-bottom, grey)
		text(img, px(x)-12, height-bottom+16, short(x), black)
	}
	line(img, left, height-bottom, width-right, height-bottom, black)
	line(img, left, top, left, height-bottom, black)
	text(img, left, 24, c.Title, black)
	text(img, (width-len(c.XLabel)*7)/2, height-bottom+40, c.XLabel, black)
	text(img, 8, top-14, c.YLabel, black)

	for i, s := range c.Series {
		col := palette[i%len(palette)]
		for j := 1; j < len(s.Points); j++ {
			a, b := s.Points[j-1], s.Points[j]
			thickLine(img, px(a.X), py(a.Y), px(b.X), py(b.Y), col)
		}
		for _, p := range s.Points {
			dot(img, px(p.X), py(p.Y), col)
		}
		ly := top + 14 + 16*i
		thickLine(img, width-right-200, ly-4, width-right-180, ly-4, col)
		text(img, width-right-174, ly, s.Name, black)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("plot %q: %w", c.Title, err)
	}
	return buf.Bytes(), nil
}

// bounds returns the x range of the data and a y range from zero to a
// little above the largest value, so ratios read true.
func (c Chart) bounds() (xs, ys [2]float64) {
	xs = [2]float64{math.Inf(1), math.Inf(-1)}
	for _, s := range c.Series {
		for _, p := range s.Points {
			xs[0], xs[1] = math.Min(xs[0], p.X), math.Max(xs[1], p.X)
			ys[1] = math.Max(ys[1], p.Y)
		}
	}
	ys[1] *= 1.15
	if ys[1] == 0 {
		ys[1] = 1
	}
	return xs, ys
}

func (c Chart) xTicks(xs [2]float64) []float64 {
	var ticks []float64
	if c.LogX {
		for x := math.Pow(10, math.Ceil(math.Log10(xs[0]))); x <= xs[1]*1.0001; x *= 10 {
			ticks = append(ticks, x)
		}
		return ticks
	}
	for i := 0; i <= 5; i++ {
		ticks = append(ticks, xs[0]+(xs[1]-xs[0])*float64(i)/5)
	}
	return ticks
}

func text(img *image.RGBA, x, y int, s string, col color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// line draws with Bresenham's algorithm.
func line(img *image.RGBA, x0, y0, x1, y1 int, col color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.Set(x0, y0, col)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func thickLine(img *image.RGBA, x0, y0, x1, y1 int, col color.Color) {
	for _, o := range []int{-1, 0, 1} {
		line(img, x0, y0+o, x1, y1+o, col)
	}
}

func dot(img *image.RGBA, x, y int, col color.Color) {
	for i := -3; i <= 3; i++ {
		for j := -3; j <= 3; j++ {
			if i*i+j*j <= 9 {
				img.Set(x+i, y+j, col)
			}
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// short writes a tick value compactly: 1k, 250k, 1M.
func short(v float64) string {
	switch {
	case v >= 1e6 && math.Mod(v, 1e5) == 0:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3 && math.Mod(v, 100) == 0:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
