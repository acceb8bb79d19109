/*
 * bench/dw_fusion.c - oneDNN 2.6: a 1x1 convolution (Clip 0-6) and the 3x3
 * depthwise convolution after it (Clip 0-6), as MobileNetV2 blocks have them,
 * run as two primitives and as one with the depthwise post-op
 * (dnnl_post_ops_append_dw_k3s1p1 / _k3s2p1), best of 20 each, 3 rounds.
 * Standalone (not built by CMake):
 *
 *   cc -O2 -o /tmp/dw_fusion bench/dw_fusion.c -ldnnl
 *   OMP_NUM_THREADS=1 /tmp/dw_fusion N IN_CHANNELS OUT_CHANNELS SIZE DW_STRIDE
 *
 * Prints the implementations oneDNN picks and the two times.  Results:
 * docs/performance.md (Zen 5, "Next step measured for mobilenet_v2").
 */
#define _POSIX_C_SOURCE 200809L
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define CK(x) do { dnnl_status_t s_ = (x); if (s_) { printf("fail %d at %s:%d\n", s_, __FILE__, __LINE__); exit(1);} } while (0)
static double now(void){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
static dnnl_engine_t eng; static dnnl_stream_t strm;
static dnnl_memory_t mk(const dnnl_memory_desc_t *md){ dnnl_memory_t m; CK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE)); return m;}
int main(int argc,char**argv){
  if (argc != 6) { fprintf(stderr, "usage: dw_fusion N IN_CHANNELS OUT_CHANNELS SIZE DW_STRIDE\n"); return 2; }
  int N=atoi(argv[1]), IC=atoi(argv[2]), OC=atoi(argv[3]), H=atoi(argv[4]), S=atoi(argv[5]);
  CK(dnnl_engine_create(&eng, dnnl_cpu, 0)); CK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
  dnnl_dims_t src_d={N,IC,H,H}, w1_d={OC,IC,1,1}, b1_d={OC}, mid_d={N,OC,H,H};
  int HO=(H+S-1)/S; dnnl_dims_t dst_d={N,OC,HO,HO}, wdw_d={OC,1,1,3,3};
  dnnl_memory_desc_t src_any, w1_any, b1_md, mid_any, dst_any, wdw_any, bdw_md;
  CK(dnnl_memory_desc_init_by_tag(&src_any,4,src_d,dnnl_f32,dnnl_nChw16c));
  CK(dnnl_memory_desc_init_by_tag(&w1_any,4,w1_d,dnnl_f32,dnnl_format_tag_any));
  CK(dnnl_memory_desc_init_by_tag(&b1_md,1,b1_d,dnnl_f32,dnnl_x));
  CK(dnnl_memory_desc_init_by_tag(&mid_any,4,mid_d,dnnl_f32,dnnl_nChw16c));
  CK(dnnl_memory_desc_init_by_tag(&dst_any,4,dst_d,dnnl_f32,dnnl_nChw16c));
  CK(dnnl_memory_desc_init_by_tag(&wdw_any,5,wdw_d,dnnl_f32,dnnl_format_tag_any));
  CK(dnnl_memory_desc_init_by_tag(&bdw_md,1,b1_d,dnnl_f32,dnnl_x));
  dnnl_dims_t st1={1,1}, p0={0,0}, stdw={S,S}, p1={1,1}, pr={1,1};
  if (S==2) { pr[0]=(HO-1)*2+3-H-1; pr[1]=pr[0]; }
  // separate
  dnnl_convolution_desc_t c1, cdw; 
  CK(dnnl_convolution_forward_desc_init(&c1,dnnl_forward_inference,dnnl_convolution_direct,&src_any,&w1_any,&b1_md,&mid_any,st1,p0,p0));
  CK(dnnl_convolution_forward_desc_init(&cdw,dnnl_forward_inference,dnnl_convolution_direct,&mid_any,&wdw_any,&bdw_md,&dst_any,stdw,p1,pr));
  dnnl_primitive_attr_t a1, adw; dnnl_post_ops_t po1, podw;
  CK(dnnl_primitive_attr_create(&a1)); CK(dnnl_post_ops_create(&po1)); CK(dnnl_post_ops_append_eltwise(po1,1.f,dnnl_eltwise_clip,0.f,6.f)); CK(dnnl_primitive_attr_set_post_ops(a1,po1));
  CK(dnnl_primitive_attr_create(&adw)); CK(dnnl_post_ops_create(&podw)); CK(dnnl_post_ops_append_eltwise(podw,1.f,dnnl_eltwise_clip,0.f,6.f)); CK(dnnl_primitive_attr_set_post_ops(adw,podw));
  dnnl_primitive_desc_t pd1, pddw; CK(dnnl_primitive_desc_create(&pd1,&c1,a1,eng,NULL)); CK(dnnl_primitive_desc_create(&pddw,&cdw,adw,eng,NULL));
  const char *i1,*idw; dnnl_primitive_desc_query(pd1,dnnl_query_impl_info_str,0,&i1); dnnl_primitive_desc_query(pddw,dnnl_query_impl_info_str,0,&idw);
  // fused
  dnnl_primitive_attr_t af; dnnl_post_ops_t pof; CK(dnnl_primitive_attr_create(&af)); CK(dnnl_post_ops_create(&pof));
  CK(dnnl_post_ops_append_eltwise(pof,1.f,dnnl_eltwise_clip,0.f,6.f));
  if (S==1) CK(dnnl_post_ops_append_dw_k3s1p1(pof,dnnl_f32,dnnl_f32,dnnl_f32,0,0,NULL)); else CK(dnnl_post_ops_append_dw_k3s2p1(pof,dnnl_f32,dnnl_f32,dnnl_f32,0,0,NULL));
  CK(dnnl_post_ops_append_eltwise(pof,1.f,dnnl_eltwise_clip,0.f,6.f));
  CK(dnnl_primitive_attr_set_post_ops(af,pof));
  dnnl_primitive_desc_t pdf; dnnl_status_t fs = dnnl_primitive_desc_create(&pdf,&c1,af,eng,NULL);
  if (fs) { printf("fused pd failed %d\n", fs); return 0; }
  const char *ifu; dnnl_primitive_desc_query(pdf,dnnl_query_impl_info_str,0,&ifu);
  printf("impl 1x1=%s dw=%s fused=%s\n", i1, idw, ifu);
  dnnl_primitive_t p1p, pdwp, pfp; CK(dnnl_primitive_create(&p1p,pd1)); CK(dnnl_primitive_create(&pdwp,pddw)); CK(dnnl_primitive_create(&pfp,pdf));
  const dnnl_memory_desc_t *w1md=dnnl_primitive_desc_query_md(pd1,dnnl_query_weights_md,0), *wdwmd=dnnl_primitive_desc_query_md(pddw,dnnl_query_weights_md,0);
  const dnnl_memory_desc_t *fw1=dnnl_primitive_desc_query_md(pdf,dnnl_query_exec_arg_md,DNNL_ARG_WEIGHTS);
  const dnnl_memory_desc_t *fwdw=dnnl_primitive_desc_query_md(pdf,dnnl_query_exec_arg_md,DNNL_ARG_ATTR_POST_OP_DW|DNNL_ARG_WEIGHTS);
  const dnnl_memory_desc_t *fdst=dnnl_primitive_desc_query_md(pdf,dnnl_query_exec_arg_md,DNNL_ARG_DST);
  const dnnl_memory_desc_t *fbdw=dnnl_primitive_desc_query_md(pdf,dnnl_query_exec_arg_md,DNNL_ARG_ATTR_POST_OP_DW|DNNL_ARG_BIAS);
  dnnl_memory_t src=mk(&src_any), w1=mk(w1md), b1=mk(&b1_md), mid=mk(&mid_any), dst=mk(&dst_any), wdw=mk(wdwmd), bdw=mk(&bdw_md);
  dnnl_memory_t fw1m=mk(fw1), fwdwm=mk(fwdw), fdstm=mk(fdst), fbdwm=mk(fbdw);
  printf("fused dst dims %ld %ld %ld %ld\n", (long)fdst->dims[0], (long)fdst->dims[1], (long)fdst->dims[2], (long)fdst->dims[3]);
  dnnl_exec_arg_t as1[]={{DNNL_ARG_SRC,src},{DNNL_ARG_WEIGHTS,w1},{DNNL_ARG_BIAS,b1},{DNNL_ARG_DST,mid}};
  dnnl_exec_arg_t asdw[]={{DNNL_ARG_SRC,mid},{DNNL_ARG_WEIGHTS,wdw},{DNNL_ARG_BIAS,bdw},{DNNL_ARG_DST,dst}};
  dnnl_exec_arg_t asf[]={{DNNL_ARG_SRC,src},{DNNL_ARG_WEIGHTS,fw1m},{DNNL_ARG_BIAS,b1},{DNNL_ARG_DST,fdstm},{DNNL_ARG_ATTR_POST_OP_DW|DNNL_ARG_WEIGHTS,fwdwm},{DNNL_ARG_ATTR_POST_OP_DW|DNNL_ARG_BIAS,fbdwm}};
  for (int rep=0; rep<3; rep++){
    double best_s=1e9,best_f=1e9;
    for(int i=0;i<20;i++){ double t=now(); CK(dnnl_primitive_execute(p1p,strm,4,as1)); CK(dnnl_primitive_execute(pdwp,strm,4,asdw)); CK(dnnl_stream_wait(strm)); t=now()-t; if(t<best_s)best_s=t;
      t=now(); CK(dnnl_primitive_execute(pfp,strm,6,asf)); CK(dnnl_stream_wait(strm)); t=now()-t; if(t<best_f)best_f=t;}
    printf("separate %.3f ms fused %.3f ms ratio %.2f\n", best_s*1e3, best_f*1e3, best_s/best_f);
  }
  return 0;
}
